"""Pairing policies after Co-scheML's Algorithm 1: idle GPUs first, then the best pairs.

One scheme, several notions of "best pair": Co-scheML (least predicted interference),
Loadbalance (least summed utilisation), Mystic (least similar metrics), the oracle (least true
interference) and random pairing (a seeded lower bound). Each is one small file.
"""
