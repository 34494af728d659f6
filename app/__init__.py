"""HeatSearch: find photos by example in your own photo folders."""

__version__ = "0.1.0"
