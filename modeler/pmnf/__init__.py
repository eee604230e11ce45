"""The PMNF fitting engine: hypothesis space, batched least squares, single- and multi-parameter
search, the Extra-P-compatible mode and the improved default mode. `modeler.estimator` is its
public face."""
