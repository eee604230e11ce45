"""scaleprobe's modeler: reads runs, fits PMNF performance models, reports them."""

__version__ = "0.1.0"
