"""Settings in plain words: a Quality/Speed choice, and an Advanced section (collapsed) with every
option, each with a tooltip. Only the models, engines and devices that can run here are offered."""
from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (QAbstractSpinBox, QApplication, QButtonGroup, QComboBox, QDialog,
                               QDialogButtonBox, QFormLayout, QGroupBox, QHBoxLayout, QLabel, QLineEdit,
                               QPushButton, QRadioButton, QScrollArea, QSpinBox, QVBoxLayout, QWidget)

from ..core.config import PRESETS, Settings
from ..core.errors import HeatSearchError
from ..core.features.engine import EngineChoice, available_devices, available_engines, int8_available, precision_of
from ..core.features.registry import REGISTRY, check_weights
from .widgets import choose_path

ENGINE_WORDS = {"auto": "Automatic (the fastest that gives exact results)", "openvino": "OpenVINO (processor)",
                "onnxruntime": "ONNX Runtime (processor)", "torch": "PyTorch (processor or graphics card)"}
DEVICE_WORDS = {"auto": "Automatic", "cpu": "The processor", "cuda": "The graphics card (NVIDIA)",
                "mps": "The graphics chip (Apple)"}
# The fields are named by what they change for the person (speed, accuracy, disk); the technical
# name is in the tooltip. A photographer could not choose among "Engine", "Runs on", "Description
# length", "Query expansion" or "Heat re-ranking: how heat spreads among them".
LABELS = {"model": "Photo analyser", "weights": "Analyser's file", "engine": "Software that runs it",
          "device": "Hardware that runs it", "precision": "Speed or exactness", "size": "Detail analysed",
          "dim": "Search index size", "qe": "Also search with the best matches",
          "her": "Order results by how they agree", "mode": "Box search", "top": "Results shown"}
MODE_WORDS = {"auto": "Automatic (best for your library)", "map": "Instant: from the whole photo's features",
              "crop": "Precise: analyse the box again", "hybrid": "Both combined"}
ONOFF_WORDS = {"auto": "Automatic (by library size)", "on": "On", "off": "Off"}
PRESET_WORDS = {"balanced": "Balanced (recommended)", "quality": "Best quality (slower indexing)",
                "speed": "Fastest indexing (slightly lower quality)"}


def usable_models(current: str) -> list[str]:
    """Models that can run here: built in, or with their weights file present (or chosen)."""
    out = []
    for name, spec in REGISTRY.items():
        if not spec.listed and current != name:  # (the tests' network)
            continue
        try:
            spec.locate(None)
            out.append(name)
        except HeatSearchError:
            if name == current or name in ("vgg16", "resnet50", "cirtorch"):
                out.append(name)  # offered: the user may name a weights file
    return out


class _WheelScrolls(QObject):
    """The mouse wheel over a drop-down or a number box that the person has not clicked scrolls
    the list it is in, instead of changing a setting unseen."""

    def __init__(self, area: QScrollArea):
        super().__init__(area)
        self.area = area

    def eventFilter(self, obj, ev) -> bool:
        if ev.type() == QEvent.Wheel and not obj.hasFocus():
            QApplication.sendEvent(self.area.verticalScrollBar(), ev)
            return True
        return False


class SettingsDialog(QDialog):
    def __init__(self, settings: Settings, parent=None, paces: dict[str, float] | None = None):
        """paces: photos a second each precision indexed at here (IndexingController.paces), so
        that 8-bit promises speed only where it was measured to give it."""
        super().__init__(parent)
        self.setWindowTitle("HeatSearch settings")
        self.base = settings
        self.paces = paces or {}
        v = QVBoxLayout(self)
        box = QGroupBox("Search quality and speed")
        bl = QVBoxLayout(box)
        self.presets = QButtonGroup(self)
        self.preset_buttons = {}
        for key in ("balanced", "quality", "speed"):
            b = QRadioButton(PRESET_WORDS[key])
            b.setToolTip(PRESETS[key]["help"])
            self.presets.addButton(b)
            self.preset_buttons[key] = b
            bl.addWidget(b)
        self.custom_note = QLabel("Custom settings (see Advanced)")
        # its line is kept when hidden: OK and the fields stay where they are as it comes and goes
        # (a field changed, the note came, and a click on OK's old place missed it)
        keep = self.custom_note.sizePolicy()
        keep.setRetainSizeWhenHidden(True)
        self.custom_note.setSizePolicy(keep)
        bl.addWidget(self.custom_note)
        v.addWidget(box)
        self.advanced_btn = QPushButton("Show advanced settings")
        self.advanced_btn.setCheckable(True)
        v.addWidget(self.advanced_btn)
        self.advanced = QWidget()
        form = QFormLayout(self.advanced)
        self.model = QComboBox()
        for name in usable_models(settings.backbone):
            self.model.addItem(REGISTRY[name].label or name, name)
        self.model.setToolTip("The model (a neural network) that describes each photo. Changing it analyses the "
                              "library's photos again.")
        form.addRow(LABELS["model"], self.model)
        wrow = QWidget()
        wl = QHBoxLayout(wrow)
        wl.setContentsMargins(0, 0, 0, 0)
        self.weights = QLineEdit(settings.weights)
        self.weights.setPlaceholderText("only for VGG16, ResNet50 or a retrieval network")
        self.weights.setToolTip("The model's weights file, for an analyser that is not built in (.pth)")
        browse = QPushButton("Browse…")
        browse.setToolTip("Choose the weights file")
        browse.clicked.connect(lambda: self._browse())
        wl.addWidget(self.weights)
        wl.addWidget(browse)
        form.addRow(LABELS["weights"], wrow)
        self.engine = QComboBox()
        for e in ["auto", *available_engines()]:
            self.engine.addItem(ENGINE_WORDS[e], e)
        self.engine.setToolTip("The inference engine that runs the model: it changes the speed, not the results. "
                               "Automatic picks the fastest one that gives exact results here.")
        form.addRow(LABELS["engine"], self.engine)
        self.device = QComboBox()
        for d in ["auto", *available_devices()]:
            self.device.addItem(DEVICE_WORDS.get(d, d), d)
        self.device.setToolTip("The device the model runs on (CPU, GPU): it changes the speed. Only what this "
                               "computer has is listed.")
        form.addRow(LABELS["device"], self.device)
        self.precision = QComboBox()
        self.precision.setToolTip("Numeric precision: Exact gives the reference results. The others describe photos "
                                  "with numbers of fewer bits (16 or 8), faster on some processors; results differ "
                                  "very slightly, and the library's photos are analysed again.")
        form.addRow(LABELS["precision"], self.precision)
        self.engine.currentIndexChanged.connect(lambda _i: self._fill_precisions())
        self.device.currentIndexChanged.connect(lambda _i: self._fill_precisions())
        self.size = QSpinBox()
        self.size.setRange(256, 2048)
        self.size.setSingleStep(64)
        self.size.setSuffix(" px")
        self.size.setToolTip("The photo size fed to the model (its longer side): more detail is slower and not "
                             "always better.")
        form.addRow(LABELS["size"], self.size)
        self.dim = QSpinBox()
        self.dim.setRange(0, 2048)
        self.dim.setSpecialValueText("Automatic (grows with the library)")
        self.dim.setToolTip("The whitened descriptor's length D: how many numbers describe each photo in the "
                            "search index. Automatic follows the library's size; smaller takes less disk and memory "
                            "and searches faster.")
        form.addRow(LABELS["dim"], self.dim)
        self.qe = QComboBox()
        self.her = QComboBox()
        for combo, tip in ((self.qe, "Query expansion: the search is made again with your photo blended with its "
                                     "closest matches, which finds more views of the same subject"),
                           (self.her, "Heat re-ranking: the best matches are reordered by how much they resemble "
                                      "each other, which puts the photos that agree with each other first")):
            for k, words in ONOFF_WORDS.items():
                combo.addItem(words, k)
            combo.setToolTip(tip)
        form.addRow(LABELS["qe"], self.qe)
        form.addRow(LABELS["her"], self.her)
        self.mode = QComboBox()
        for k, words in MODE_WORDS.items():
            self.mode.addItem(words, k)
        self.mode.setToolTip("How a box is searched: instantly from the photo's features, or by analysing the box again")
        form.addRow(LABELS["mode"], self.mode)
        self.top = QSpinBox()
        self.top.setRange(1, 5000)
        self.top.setToolTip("How many results a search shows")
        form.addRow(LABELS["top"], self.top)
        self.advanced.setVisible(False)
        # on a small screen the advanced section scrolls instead of pushing the buttons off it
        self.advanced_area = QScrollArea()
        self.advanced_area.setWidget(self.advanced)
        self.advanced_area.setWidgetResizable(True)
        self.advanced_area.setFrameShape(QScrollArea.NoFrame)
        self.advanced_area.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)  # as wide as its rows (below)
        self.advanced_area.setVisible(False)
        wheel = _WheelScrolls(self.advanced_area)
        for w in self.advanced.findChildren(QComboBox) + self.advanced.findChildren(QAbstractSpinBox):
            w.setFocusPolicy(Qt.StrongFocus)  # a wheel over it does not give it the focus
            w.installEventFilter(wheel)
        v.addWidget(self.advanced_area, 1)
        self.error = QLabel()
        self.error.setStyleSheet("color: #b03030")
        self.error.setWordWrap(True)
        self.error.setVisible(False)
        v.addWidget(self.error)
        bb = self.buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.accepted.connect(self._accept)
        bb.rejected.connect(self.reject)
        v.addWidget(bb)
        self.advanced_btn.toggled.connect(self._toggle_advanced)
        self.presets.buttonClicked.connect(self._apply_preset)
        self._load(settings)
        # the preset the fields make, as they change (else with ResNet50 chosen under Advanced,
        # "Balanced (recommended)" stayed chosen until the dialog was opened again)
        for combo in (self.model, self.engine, self.device, self.precision):
            combo.currentIndexChanged.connect(lambda _i: self._show_preset())
        self.weights.textChanged.connect(lambda _t: self._show_preset())
        self.size.valueChanged.connect(lambda _v: self._show_preset())

    def _load(self, s: Settings) -> None:
        self.model.setCurrentIndex(max(0, self.model.findData(s.backbone)))
        self.weights.setText(s.weights)
        self.engine.setCurrentIndex(max(0, self.engine.findData(s.engine)))
        self.device.setCurrentIndex(max(0, self.device.findData(s.device)))
        self._fill_precisions(s.precision)
        self.size.setValue(s.max_side)
        self.dim.setValue(s.dim)
        self.qe.setCurrentIndex(max(0, self.qe.findData(s.qe)))
        self.her.setCurrentIndex(max(0, self.her.findData(s.her)))
        self.mode.setCurrentIndex(max(0, self.mode.findData(s.region_mode)))
        self.top.setValue(s.top)
        self._show_preset()

    def _show_preset(self) -> None:
        """The preset that the fields make chosen; none and "Custom settings" when they make none."""
        preset = preset_of(self.result_settings())
        self.presets.setExclusive(False)  # (an exclusive group keeps one button checked)
        for key, b in self.preset_buttons.items():
            b.setChecked(key == preset)
        self.presets.setExclusive(True)
        self.custom_note.setVisible(preset == "custom")

    def _fill_precisions(self, want: str | None = None) -> None:
        """The precisions this computer offers with the chosen engine and device, in plain words
        (reduced precision names what it is here: bf16, or nothing faster)."""
        want = want or self.precision.currentData() or "exact"
        try:
            fast = precision_of(EngineChoice(self.engine.currentData() or "auto", self.device.currentData() or "auto", True))
        except HeatSearchError:
            fast = "f32"
        items = [("Exact (recommended)", "exact")]
        if fast != "f32" or want == "fastest":
            items.append(("Reduced on this processor (bf16; faster, slightly less exact)" if fast == "bf16"
                          else "Reduced where the hardware has it (none here: exact)", "fastest"))
        if int8_available() or want == "int8":
            items.append((int8_words(self.paces), "int8"))
        self.precision.blockSignals(True)
        self.precision.clear()
        for words, key in items:
            self.precision.addItem(words, key)
        self.precision.setCurrentIndex(max(0, self.precision.findData(want)))
        self.precision.blockSignals(False)

    def _apply_preset(self, button) -> None:
        key = next(k for k, b in self.preset_buttons.items() if b is button)
        self._load(replace(self.result_settings(), **{k: v for k, v in PRESETS[key].items() if k != "help"}))

    def _toggle_advanced(self, on: bool) -> None:
        self.advanced.setVisible(on)
        self.advanced_area.setVisible(on)
        self.advanced_btn.setText("Hide advanced settings" if on else "Show advanced settings")
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        room = (screen.height() - 60) if screen is not None else 700  # the window manager's title bar
        self.advanced_area.setMinimumHeight(min(self.advanced.sizeHint().height(), max(200, room - 260)) if on else 0)
        bar = self.advanced_area.verticalScrollBar().sizeHint().width()
        self.advanced_area.setMinimumWidth(self.advanced.sizeHint().width() + bar if on else 0)
        self.adjustSize()
        if self.height() > room:
            self.resize(self.width(), room)
        if screen is not None:  # grown downwards from where it opened: moved up, centred on the
            frame = self.frameGeometry()  # screen (it stopped at the bottom edge at 768 px)
            top = min(frame.top(), screen.top() + max(0, (screen.height() - frame.height()) // 2))
            left = min(frame.left(), screen.right() - frame.width())
            self.move(max(screen.left(), left), max(screen.top(), top))

    def _browse(self) -> None:
        path, _ = choose_path(self, "The analyser's file (its weights)", "", "PyTorch weights (*.pth *.pt)")
        if path:
            self.weights.setText(path)

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))
        if text and not self.advanced_btn.isChecked():
            self.advanced_btn.setChecked(True)

    def _accept(self) -> None:
        new = self.result_settings()
        try:
            check_weights(new)
            if new.weights and (new.backbone, new.weights) != (self.base.backbone, self.base.weights):
                self._check_loads(new)
        except HeatSearchError as e:
            self.show_error(str(e))
            return
        self.accept()

    def _check_loads(self, new: Settings) -> None:
        """A weights file the person named is loaded into its network now, in a child process (a
        few seconds; registry.check_loads), so that a file no engine can use (never trained,
        another network) is refused here, not after the re-index question and the model's load
        (otherwise: the question (86 s), 12 s of "loading the model…", then the refusal)."""
        from ..core.features.registry import check_loads, load_backbone

        self.error.setStyleSheet("")
        self.error.setText("Checking the weights file (a few seconds)…")
        self.error.setVisible(True)
        QApplication.setOverrideCursor(Qt.WaitCursor)
        QApplication.processEvents()
        try:
            check_loads(load_backbone(new.backbone, new.weights))
        except HeatSearchError as e:
            raise HeatSearchError(f"Analyser's file: {e}") from e
        finally:
            QApplication.restoreOverrideCursor()
            self.error.setStyleSheet("color: #b03030")
            self.error.setVisible(False)

    def result_settings(self) -> Settings:
        s = replace(self.base, backbone=self.model.currentData(), weights=self.weights.text().strip(),
                    engine=self.engine.currentData(), device=self.device.currentData(),
                    precision=self.precision.currentData() or "exact", max_side=self.size.value(),
                    dim=self.dim.value(), qe=self.qe.currentData(), her=self.her.currentData(),
                    region_mode=self.mode.currentData(), top=self.top.value(), problems=[])
        s.preset = preset_of(s)
        return s


def preset_of(s: Settings) -> str:
    for key, values in PRESETS.items():
        if all(getattr(s, k) == v for k, v in values.items() if k != "help"):
            return key
    return "custom"


def int8_words(paces: dict[str, float]) -> str:
    """The 8-bit choice as measured here: faster or not by the last runs of each precision
    (photos a second), or what is known before one has run (it was slower than exact on a
    2-core AVX2 laptop: 2.1 against 3.0 photos a second). Short: the drop-down is as wide as its
    longest choice, and the dialog must fit a small screen."""
    exact, int8 = paces.get("exact"), paces.get("int8")
    if not int8:
        return "8-bit, tuned on your photos (faster on some processors)"
    if not exact:
        return f"8-bit, tuned on your photos ({int8:.1f} photos/s here)"
    if int8 > 1.1 * exact:
        return f"8-bit: faster here ({int8:.1f} vs {exact:.1f} photos/s)"
    return f"8-bit: not faster here ({int8:.1f} vs {exact:.1f} photos/s)"
