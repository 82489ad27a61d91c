"""dlsched: a prediction-based, interference- and topology-aware scheduler for GPU clusters
running deep-learning jobs, with a fast trace-driven simulator to evaluate it."""

__version__ = "0.1.0"
