"""The query pane: the query photo with its box (QueryView), the buttons to open, paste and clear,
and the heat legend (shown only while the overlay is on)."""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from ..core.heatmap import legend_rgb
from .query_view import QueryView, rgba_qimage


class QueryPane(QWidget):
    openRequested = Signal()
    pasteRequested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        self.view = QueryView()
        v.addWidget(self.view, 1)
        row = QHBoxLayout()
        self.open_btn = QPushButton("Open…")
        self.open_btn.setToolTip("Search with a photo from disk (Ctrl+O)")
        self.paste_btn = QPushButton("Paste")
        self.paste_btn.setToolTip("Search with a copied photo or a copied file path (Ctrl+V)")
        self.clear_box_btn = QPushButton("Clear box")
        self.clear_box_btn.setToolTip("Search the whole photo again (Esc)")
        for b in (self.open_btn, self.paste_btn, self.clear_box_btn):
            row.addWidget(b)
        row.addStretch()
        v.addLayout(row)
        self.legend = QWidget()
        lg = QHBoxLayout(self.legend)
        lg.setContentsMargins(0, 0, 0, 0)
        # on the results, what matches the query; on the query, what its description is made
        # of; short: it sets the pane's minimum width ("Each photo's description" made the
        # window 1012 px at least)
        lg.addWidget(QLabel("Heat: little"))
        bar = QLabel()
        bar.setPixmap(QPixmap.fromImage(rgba_qimage(np.dstack([legend_rgb(80, 10), np.full((10, 80), 255, np.uint8)]))))
        bar.setToolTip("Heat overlay. On the results: how much each part matches your photo or box (warm: most; "
                       "a result that matches little stays cool). "
                       "On your photo: how much each part makes up what is searched for "
                       "(cool: plain areas such as sky, and texture that repeats)")
        lg.addWidget(bar)
        lg.addWidget(QLabel("most"))
        lg.addStretch()
        policy = self.legend.sizePolicy()
        policy.setRetainSizeWhenHidden(True)  # the photo does not jump when the legend shows
        self.legend.setSizePolicy(policy)
        self.legend.setVisible(False)
        v.addWidget(self.legend)
        self.open_btn.clicked.connect(self.openRequested)
        self.paste_btn.clicked.connect(self.pasteRequested)
        self.clear_box_btn.clicked.connect(self.view.clear_box)

    def set_heat(self, on: bool) -> None:
        self.view.set_overlay_visible(on)
        self.legend.setVisible(on)
