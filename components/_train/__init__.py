"""The train step's internals (its entry point is ``components/train.py``): inputs,
evaluation while training, warm start, the serving export."""
