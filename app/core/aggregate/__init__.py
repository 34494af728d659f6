"""Aggregation of local CNN features into one global vector per image (HeW, SumA)."""
