"""Script code whose batches come from its data sources in less common ways:
a label batch converted with `.type(...)`, two loaders zipped, a function that
reads a module-level loader called from the training loop, imports guarded by
a handler that only reports their failure, the legacy CUDA tensor types, and
images a model flattens before its first Linear."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import line_of
from test_verify import _lint, _write

# A label batch the script converts (`labels.type(LongTensor)`): a tensor, not a record with fields.
LABELS_SCRIPT = """
    import torch
    import torch.nn as nn
    from torch.autograd import Variable
    from torch.utils.data import DataLoader

    classifier = nn.Linear(12, 5)
    loader = DataLoader(read_split("train"), batch_size=4, num_workers=2)
    LongTensor = torch.LongTensor

    for step, (features, labels) in enumerate(loader):
        labels = Variable(labels.type(LongTensor))
        scores = classifier(features)
        loss = nn.functional.cross_entropy(scores, labels.data)
        loss.backward()
"""

# Two loaders zipped; the generator takes the image first and noise second,
# and its first layer reads the noise.
ZIPPED_SCRIPT = """
    import torch
    import torch.nn as nn
    from torch.autograd import Variable
    from torch.utils.data import DataLoader


    class Translator(nn.Module):
        def __init__(self):
            super().__init__()
            self.noise_to_plane = nn.Linear(6, 3 * 16 * 16)
            self.mix = nn.Conv2d(6, 3, 3, padding=1)

        def forward(self, picture, noise):
            plane = self.noise_to_plane(noise).view(*picture.shape)
            return self.mix(torch.cat((picture, plane), 1))


    translator = Translator()
    source_loader = DataLoader(read_split("source"), batch_size=4, num_workers=2)
    target_loader = DataLoader(read_split("target"), batch_size=4, num_workers=2)
    Tensor = torch.FloatTensor

    for step, ((source_imgs, _), (target_imgs, _)) in enumerate(zip(source_loader, target_loader)):
        source_imgs = Variable(source_imgs.type(Tensor).expand(source_imgs.size(0), 3, 16, 16))
        target_imgs = Variable(target_imgs.type(Tensor))
        translated = translator(source_imgs, torch.randn(source_imgs.size(0), 6))
        (translated - target_imgs).abs().mean().backward()
"""

# A function that reads a module-level loader, called from the training loop.
SAMPLING_SCRIPT = """
    import torch
    import torch.nn as nn
    from torch.autograd import Variable
    from torch.utils.data import DataLoader

    painter = nn.Conv2d(3, 3, 3, padding=1)
    train_loader = DataLoader(read_split("train"), batch_size=4, num_workers=2)
    preview_loader = DataLoader(read_split("preview"), batch_size=4, num_workers=2)
    Tensor = torch.FloatTensor


    def preview(step):
        pair = next(iter(preview_loader))
        before = Variable(pair["before"].type(Tensor))
        return painter(before)


    shown = 0
    for step, pair in enumerate(train_loader):
        painted = painter(pair["before"].type(Tensor))
        (painted - pair["after"].type(Tensor)).pow(2).mean().backward()
        if step % 2 == 0:
            preview(shown)
"""

# Imports guarded by a handler that only reports a failed one.
GUARDED_IMPORTS_SCRIPT = """
    try:
        import torch
        import torch.nn as nn
        from torch.autograd import Variable
        from torch.utils.data import DataLoader
        import package_that_is_not_installed
    except ImportError as error:
        print(error)
        raise ImportError

    scorer = nn.Linear(10, 1)
    loader = DataLoader(read_split("train"), batch_size=4, num_workers=2)

    for step, (rows, targets) in enumerate(loader):
        rows = Variable(rows.type(torch.FloatTensor))
        scorer(rows).sum().backward()
"""

# Images a model flattens before its first Linear, compared with images later.
FLATTENED_SCRIPT = """
    import torch
    import torch.nn as nn
    from torch.autograd import Variable
    from torch.utils.data import DataLoader

    shape = (1, 8, 8)


    class AutoEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.down = nn.Linear(64, 16)
            self.up = nn.Linear(16, 64)

        def forward(self, img):
            flat = img.view(img.size(0), -1)
            return self.up(self.down(flat)).view(img.size(0), *shape)


    model = AutoEncoder()
    loader = DataLoader(read_split("train"), batch_size=4, num_workers=2)
    Tensor = torch.FloatTensor

    for step, (imgs, _) in enumerate(loader):
        rebuilt = model(imgs.float())
        loss = nn.functional.l1_loss(rebuilt, imgs.float())
        loss.backward()
        real_imgs = Variable(imgs.float())
"""


@pytest.fixture(scope="module")
def verdicts(verifier, tmp_path_factory):
    """{(file, line): Verification} of the DL701 findings of the scripts above, in one run."""
    folder = tmp_path_factory.mktemp("sources")
    findings = []
    for name, source in (
        ("labels.py", LABELS_SCRIPT),
        ("zipped.py", ZIPPED_SCRIPT),
        ("sampling.py", SAMPLING_SCRIPT),
        ("guarded.py", GUARDED_IMPORTS_SCRIPT),
        ("flattened.py", FLATTENED_SCRIPT),
    ):
        path = _write(folder, name, source)
        findings += _lint(path, str(path), ["DL701"])
    verified = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    return {(Path(f.path).name, f.line): f.verification for f in verified}


def _verdict(verdicts, name, source, text):
    verification = verdicts[(name, line_of(source, text))]
    assert verification is not None
    return verification


def _decided_on_a_batch(verification, source_name):
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert f"a batch of the script's data source `{source_name}`" in verification.evidence


def test_a_label_batch_converted_with_type_is_a_tensor(verdicts):
    verification = _verdict(verdicts, "labels.py", LABELS_SCRIPT, "labels = Variable(labels.type(LongTensor))")
    _decided_on_a_batch(verification, "loader")


def test_zipped_loaders_give_each_element_its_own_shape(verdicts):
    for text, source_name in (
        ("source_imgs = Variable(source_imgs.type(Tensor).expand(", "source_loader"),
        ("target_imgs = Variable(target_imgs.type(Tensor))", "target_loader"),
    ):
        verification = _verdict(verdicts, "zipped.py", ZIPPED_SCRIPT, text)
        _decided_on_a_batch(verification, source_name)


def test_a_function_called_from_the_loop_reads_its_module_level_loader(verdicts):
    verification = _verdict(verdicts, "sampling.py", SAMPLING_SCRIPT, 'before = Variable(pair["before"].type(Tensor))')
    assert verification.status != "inconclusive", verification.evidence
    assert "synthesized batches for the data source `preview_loader`" in verification.evidence


def test_imports_guarded_by_a_reporting_handler_run_as_plain_imports(verdicts):
    verification = _verdict(verdicts, "guarded.py", GUARDED_IMPORTS_SCRIPT, "rows = Variable(rows.type(torch.FloatTensor))")
    _decided_on_a_batch(verification, "loader")


def test_images_a_model_flattens_keep_their_image_shape(verdicts):
    verification = _verdict(verdicts, "flattened.py", FLATTENED_SCRIPT, "real_imgs = Variable(imgs.float())")
    _decided_on_a_batch(verification, "loader")


def test_the_legacy_cuda_tensor_types_make_cpu_tensors_while_confined():
    import torch

    from detachlint.verify.runtime.standins import cpu_only

    original = torch.cuda.FloatTensor
    with cpu_only():
        made = torch.cuda.FloatTensor(2, 1).fill_(1.0)
        converted = torch.zeros(3).type(torch.cuda.LongTensor)
    assert made.device.type == "cpu" and made.dtype == torch.float32
    assert converted.dtype == torch.long
    assert torch.cuda.FloatTensor is original  # restored afterwards
