"""Settings dialog: model, device, input size, D, QE and HeR options."""
from __future__ import annotations

from dataclasses import replace

from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFileDialog, QFormLayout,
                               QHBoxLayout, QLineEdit, QPushButton, QSpinBox, QWidget)

from ..core.config import Settings
from ..core.features.registry import REGISTRY


class SettingsDialog(QDialog):
    def __init__(self, settings: Settings, parent=None):
        super().__init__(parent)
        self.setWindowTitle("HeatSearch settings")
        self.base = settings
        form = QFormLayout(self)
        self.backbone = QComboBox()
        for name, spec in REGISTRY.items():
            if name != "tiny-random" or settings.backbone == name:
                self.backbone.addItem(f"{name} — {spec.description}", name)
        self.backbone.setCurrentIndex(max(0, self.backbone.findData(settings.backbone)))
        form.addRow("Model", self.backbone)
        wrow = QWidget()
        wl = QHBoxLayout(wrow)
        wl.setContentsMargins(0, 0, 0, 0)
        self.weights = QLineEdit(settings.weights)
        self.weights.setPlaceholderText("weights file (VGG16 / ResNet50 / retrieval checkpoint)")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        wl.addWidget(self.weights)
        wl.addWidget(browse)
        form.addRow("Weights file", wrow)
        self.device = QComboBox()
        for d in ("auto", "cpu", "cuda", "mps"):
            self.device.addItem(d)
        self.device.setCurrentText(settings.device)
        form.addRow("Device", self.device)
        self.size = QSpinBox()
        self.size.setRange(224, 2048)
        self.size.setSingleStep(64)
        self.size.setValue(settings.max_side)
        self.size.setSuffix(" px")
        form.addRow("Input size (longer side)", self.size)
        self.dim = QSpinBox()
        self.dim.setRange(32, 2048)
        self.dim.setValue(settings.dim)
        form.addRow("Dimension D", self.dim)
        self.qe = QCheckBox("on")
        self.qe.setChecked(settings.qe)
        form.addRow("Query expansion", self.qe)
        self.qe_n = QSpinBox()
        self.qe_n.setRange(1, 50)
        self.qe_n.setValue(settings.qe_n)
        form.addRow("QE neighbours n", self.qe_n)
        self.qe_alpha = QDoubleSpinBox()
        self.qe_alpha.setRange(0, 10)
        self.qe_alpha.setValue(settings.qe_alpha)
        self.qe_alpha.setToolTip("0 = average QE; >0 = weighted by similarity^alpha")
        form.addRow("QE weighting alpha", self.qe_alpha)
        self.her = QCheckBox("on")
        self.her.setChecked(settings.her)
        form.addRow("Heat re-ranking", self.her)
        self.her_k = QSpinBox()
        self.her_k.setRange(10, 5000)
        self.her_k.setValue(settings.her_k)
        form.addRow("HeR shortlist k", self.her_k)
        self.mode = QComboBox()
        self.mode.addItem("map: instant, from the photo's feature map", "map")
        self.mode.addItem("crop: run the model on the box (slower)", "crop")
        self.mode.setCurrentIndex(max(0, self.mode.findData(settings.region_mode)))
        form.addRow("Box search", self.mode)
        bb = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        form.addRow(bb)

    def _browse(self):
        path, _ = QFileDialog.getOpenFileName(self, "Weights file", "", "PyTorch weights (*.pth *.pt)")
        if path:
            self.weights.setText(path)

    def result_settings(self) -> Settings:
        return replace(self.base, backbone=self.backbone.currentData(), weights=self.weights.text().strip(),
                       device=self.device.currentText(), max_side=self.size.value(), dim=self.dim.value(),
                       qe=self.qe.isChecked(), qe_n=self.qe_n.value(), qe_alpha=self.qe_alpha.value(),
                       her=self.her.isChecked(), her_k=self.her_k.value(), region_mode=self.mode.currentData())
