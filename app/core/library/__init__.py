"""The photo library: catalog + descriptor space + vectors, behind one service with one writer."""
