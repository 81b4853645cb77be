"""Direction 1: TF1 SessionRunHooks inside Keras fit / evaluate / predict."""
