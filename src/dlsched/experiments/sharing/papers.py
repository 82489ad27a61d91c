"""The sharing papers' published figures, quoted beside ours (minutes for Horus's makespans,
seconds for Co-scheML's JCT and makespan, fractions for gains and utilisation)."""

from __future__ import annotations

# Horus Table 6: workload -> policy -> (makespan mean min, std min, gain vs FIFO)
HORUS_TABLE6 = {
    "horus-wlarge": {"FIFO": (306.9, 1.15, None), "PAB": (277.6, 1.72, 0.095), "OBP": (238.6, 4.9, 0.222),
                     "Horus": (212.8, 5.04, 0.307)},
    "horus-wsmall": {"FIFO": (267.3, 1.32, None), "PAB": (250.4, 2.02, 0.063), "OBP": (225.3, 5.38, 0.157),
                     "Horus": (204.0, 8.5, 0.237)},
}
HORUS_UTILISATION = 0.696   # Horus's average cluster GPU utilisation in the testbed (§6.1)

# Horus Table 7: waiting time in scheduling steps (avg, median, std, reduction vs FIFO)
HORUS_TABLE7 = {"FIFO": (466.2, 463.1, 327.7, None), "OBP": (347.8, 351.4, 248.9, 0.254),
                "Horus": (156.5, 150.1, 130.4, 0.664), "Horus-f": (147.6, 148.5, 126.2, 0.683)}
HORUS_K_SENSITIVITY = "k = 5 waits ~1 % less than k = 3; makespan slightly worse as k grows (Fig. 9c-d)"

# Co-scheML Fig. 7-9: average JCT (s), makespan (s), speedup, GPU utilisation
COSCHEML = {"Co-scheML": (844.09, 1705.1, 0.78, 0.78), "Binpack": (1089.32, 2156.1, 0.56, None),
            "Loadbalance": (943.05, 2027.3, 0.67, 0.59), "Mystic": (967.94, 2031.8, 0.75, 0.67)}
