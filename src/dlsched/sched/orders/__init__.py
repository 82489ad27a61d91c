"""Queue orders: each file is one OrderingPolicy subclass that only says how jobs are keyed."""
