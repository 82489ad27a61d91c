"""The papers' experiments as functions over the one engine (the CLI's ``dlsched experiment``)."""
