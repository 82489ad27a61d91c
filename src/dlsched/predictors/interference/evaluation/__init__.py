"""Evaluation of interference models as ``../shared/profiles/EVALUATION.md`` prescribes: folds by
architecture (and by GPU type on Gavel), slowdown errors, partner-ranking quality and regret."""
