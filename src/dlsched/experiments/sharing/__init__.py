"""The GPU-sharing papers' experiments (Horus, Co-scheML, and the utilisation-prediction workshop
paper): the paired-seed protocol over their workloads, the named truths, and the tables."""
