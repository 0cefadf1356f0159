"""Input shapes the synthesis reads off the user's program: subscripts, permutes
and concatenations before a layer, methods of a base class, lambdas, copied
models, graph propagation, packed sequences, attention masks and the
arguments of CTC and KL-divergence losses (`verify/runtime/synthesis.py`)."""

import inspect
import textwrap

import pytest

torch = pytest.importorskip("torch")

from detachlint.verify.runtime.synthesis import Plan, Synth, method_ast  # noqa: E402
from detachlint.verify.runtime.user_code import UserModule  # noqa: E402


def _run(source, cls, method, ctor=None):
    """The synthesized arguments of `cls.method`, after running the user's method on them."""
    user = UserModule({"path": "train.py", "blocks": [{"line": 1, "text": textwrap.dedent(source)}]})
    try:
        synth = Synth(user, Plan(), {})
        instance = eval(ctor, user.ns) if ctor else synth.construct(user.ns[cls])
        function = method_ast(user.class_ast_of, instance, method)
        bound = getattr(instance, method)
        args, kwargs = synth.arguments(inspect.signature(bound), function, {"self": instance}, skip_self=False)
        bound(*args, **kwargs)
        return kwargs
    finally:
        user.close()


def test_a_time_step_taken_by_a_subscript_adds_the_time_dimension():
    kwargs = _run(
        """
        import torch
        from torch import nn

        class LstmCell(nn.Module):
            def __init__(self, input_size=3, hidden_size=4):
                super().__init__()
                self.hidden_size = hidden_size
                self.input_linearity = nn.Linear(input_size, 4 * hidden_size)
                self.state_linearity = nn.Linear(hidden_size, 4 * hidden_size)

            def forward(self, inputs, batch_lengths):
                batch_size, total_steps = inputs.size()[0], inputs.size()[1]
                state = inputs.new_zeros(batch_size, self.hidden_size)
                outputs = []
                for step in range(total_steps):
                    index = step if self.training else total_steps - step - 1
                    step_input = inputs[0:batch_size, index]
                    gates = self.input_linearity(step_input) + self.state_linearity(state)
                    state = torch.tanh(gates[:, :self.hidden_size])
                    outputs.append(state)
                return torch.stack(outputs, 1)
        """,
        "LstmCell",
        "forward",
    )
    assert tuple(kwargs["inputs"].shape) == (2, 8, 3)


def test_one_sample_of_the_batch_through_a_lambda_of_the_model():
    kwargs = _run(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class LitModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 5))

            def forward(self, x):
                return self.net(x)

            def jacobian(self, x):
                f = lambda v: self(v) ** 2
                xg = x[0].clone().requires_grad_(True)
                out = f(xg)
                rows = [torch.autograd.grad(out, xg, v, retain_graph=True)[0] for v in torch.eye(x.shape[1]).unbind()]
                return torch.stack(rows)
        """,
        "LitModel",
        "jacobian",
    )
    assert tuple(kwargs["x"].shape) == (2, 5)


def test_an_inherited_method_and_what_it_returns_are_followed():
    kwargs = _run(
        """
        import torch
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.convnet = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2), nn.ReLU(), nn.Conv2d(8, 8, 3), nn.ReLU())

            def forward(self, obs):
                h = self.convnet(obs / 255.0 - 0.5)
                return h.view(h.shape[0], -1)

        class Agent:
            def __init__(self):
                self.encoder = Encoder()
                self.critic = nn.Linear(8 * 3 * 3, 1)

            def encode(self, obs):
                return self.encoder(obs)

        class PixelAgent(Agent):
            def update(self, obs):
                with torch.no_grad():
                    obs = self.encode(obs)
                return self.critic(obs).mean()
        """,
        "PixelAgent",
        "update",
    )
    assert tuple(kwargs["obs"].shape) == (2, 3, 11, 11)


def test_a_permute_and_a_loop_over_layers_before_the_first_linear():
    kwargs = _run(
        """
        import torch
        from torch import nn
        from torch.nn import functional as F

        class Prenet(nn.Module):
            def __init__(self, in_dim, sizes):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(i, o) for i, o in zip([in_dim] + sizes[:-1], sizes)])

            def forward(self, x):
                for linear in self.layers:
                    x = F.dropout(F.relu(linear(x)), p=0.5, training=True)
                return x

        class Decoder(nn.Module):
            def __init__(self, n_mel_channels=4):
                super().__init__()
                self.n_mel_channels = n_mel_channels
                self.prenet = Prenet(n_mel_channels, [8, 8])

            def forward(self, memory, decoder_inputs):
                go_frame = memory.new_zeros(1, memory.size(0), self.n_mel_channels)
                decoder_inputs = decoder_inputs.permute(2, 0, 1)
                return self.prenet(torch.cat((go_frame, decoder_inputs), dim=0))
        """,
        "Decoder",
        "forward",
    )
    assert tuple(kwargs["decoder_inputs"].shape) == (2, 4, 8)


def test_parts_concatenated_before_a_linear_share_its_width():
    kwargs = _run(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class LatentActionModel(nn.Module):
            def __init__(self, in_dim=12, latent_dim=4):
                super().__init__()
                self.encoder = nn.Sequential(nn.Linear(2 * in_dim, 32), nn.GELU(), nn.Linear(32, latent_dim))
                self.decoder = nn.Sequential(nn.Linear(in_dim + latent_dim, 32), nn.GELU(), nn.Linear(32, in_dim))

            def encode(self, frames, next_frames):
                return self.encoder(torch.cat([frames, next_frames], dim=-1))

            def forward(self, frames, next_frames):
                z = self.encode(frames, next_frames)
                recon = self.decoder(torch.cat([frames, z], dim=-1))
                return F.mse_loss(recon, next_frames)
        """,
        "LatentActionModel",
        "forward",
    )
    assert tuple(kwargs["frames"].shape) == tuple(kwargs["next_frames"].shape) == (2, 12)


def test_a_deep_copy_of_the_model_takes_the_models_input():
    kwargs = _run(
        """
        import copy
        import torch
        import torch.nn as nn

        class DemandModel(nn.Module):
            def __init__(self, in_dim=6, hidden=16):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

            def forward(self, x):
                return self.net(x)

        class Learner:
            def __init__(self):
                self.model = DemandModel()
                self.criterion = nn.MSELoss()

            def inner_update(self, support_x, support_y):
                adapted = copy.deepcopy(self.model)
                loss = self.criterion(adapted(support_x), support_y)
                return torch.autograd.grad(loss, list(adapted.parameters()))
        """,
        "Learner",
        "inner_update",
    )
    assert tuple(kwargs["support_x"].shape) == (2, 6)


def test_propagation_over_a_graph_makes_the_adjacency_square():
    kwargs = _run(
        """
        import torch
        from torch import nn

        def trans_to_cuda(variable):
            return variable.cuda() if torch.cuda.is_available() else variable

        class HyperConv(nn.Module):
            def __init__(self, layers=2):
                super().__init__()
                self.layers = layers

            def forward(self, adjacency, embedding):
                item_embeddings = embedding
                final = [item_embeddings]
                for i in range(self.layers):
                    item_embeddings = torch.sparse.mm(trans_to_cuda(adjacency), item_embeddings)
                    final.append(item_embeddings)
                return torch.stack(final).sum(0)
        """,
        "HyperConv",
        "forward",
    )
    adjacency, embedding = kwargs["adjacency"], kwargs["embedding"]
    assert adjacency.shape[0] == adjacency.shape[1] == embedding.shape[0]


def test_an_attention_mask_has_one_entry_per_token():
    kwargs = _run(
        """
        import torch
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self, vocab_size=20, hidden=16):
                super().__init__()
                self.embed_tokens = nn.Embedding(vocab_size, hidden)
                self.layer = nn.GRU(hidden, hidden, batch_first=True)

            def forward(self, input_ids, attention_mask):
                h, _ = self.layer(self.embed_tokens(input_ids))
                h = h * attention_mask.unsqueeze(-1)
                return h.sum(1) / attention_mask.sum(1, keepdim=True)
        """,
        "Encoder",
        "forward",
    )
    assert kwargs["attention_mask"].shape == kwargs["input_ids"].shape == (2, 8)


def test_a_packed_sequence_argument_is_packed_from_what_it_pads_to():
    kwargs = _run(
        """
        import torch
        from torch import nn
        from torch.nn.utils.rnn import PackedSequence, pad_packed_sequence

        class AugmentedLstm(nn.Module):
            def __init__(self, input_size=6, hidden_size=5):
                super().__init__()
                self.input_linearity = nn.Linear(input_size, 4 * hidden_size)

            def forward(self, inputs: PackedSequence):
                sequence_tensor, batch_lengths = pad_packed_sequence(inputs, batch_first=True)
                outputs = [self.input_linearity(sequence_tensor[:, t]) for t in range(sequence_tensor.size(1))]
                return torch.stack(outputs, 1), batch_lengths
        """,
        "AugmentedLstm",
        "forward",
    )
    packed = kwargs["inputs"]
    assert isinstance(packed, torch.nn.utils.rnn.PackedSequence)
    padded, lengths = torch.nn.utils.rnn.pad_packed_sequence(packed, batch_first=True)
    assert tuple(padded.shape) == (2, 8, 6) and lengths.tolist() == [8, 8]


def test_a_tensor_named_like_a_number_is_a_tensor_when_a_layer_takes_it():
    kwargs = _run(
        """
        import torch
        import torch.nn as nn

        class MoCo(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder_q = nn.Linear(12, 8)
                self.encoder_k = nn.Linear(12, 8)

            def forward(self, im_q, im_k):
                q = nn.functional.normalize(self.encoder_q(im_q), dim=1)
                with torch.no_grad():
                    k = nn.functional.normalize(self.encoder_k(im_k), dim=1)
                return torch.einsum("nc,nc->n", [q, k])
        """,
        "MoCo",
        "forward",
    )
    assert tuple(kwargs["im_k"].shape) == (2, 12)


def test_lengths_named_after_the_output_are_lengths():
    kwargs = _run(
        """
        import torch
        from torch import nn

        class Masker(nn.Module):
            def forward(self, outputs, output_lengths):
                ids = torch.arange(0, int(torch.max(output_lengths).item()))
                mask = ids < output_lengths.unsqueeze(1)
                return outputs * mask
        """,
        "Masker",
        "forward",
    )
    assert kwargs["output_lengths"].dtype == torch.long and kwargs["output_lengths"].dim() == 1


def test_ctc_loss_arguments_are_log_probs_labels_and_lengths():
    kwargs = _run(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class SpeechModel(nn.Module):
            def __init__(self, features=13, classes=6):
                super().__init__()
                self.rnn = nn.GRU(features, 16)
                self.out = nn.Linear(16, classes)
                self.ctc = nn.CTCLoss()

            def forward(self, x):
                h, _ = self.rnn(x)
                return self.out(h).log_softmax(2)

            def loss(self, x, targets, input_lengths, target_lengths):
                return self.ctc(self(x), targets, input_lengths, target_lengths)
        """,
        "SpeechModel",
        "loss",
    )
    assert kwargs["targets"].dtype == torch.long and int(kwargs["targets"].min()) >= 1 and int(kwargs["targets"].max()) < 6
    assert kwargs["input_lengths"].tolist() == [8, 8] and kwargs["target_lengths"].tolist() == [4, 4]


def test_a_kl_divergence_target_is_a_distribution():
    kwargs = _run(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Student(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 5)

            def forward(self, x):
                return self.fc(x)

            def distill(self, x, soft_targets):
                return F.kl_div(F.log_softmax(self(x), dim=1), soft_targets, reduction="batchmean")
        """,
        "Student",
        "distill",
    )
    probs = kwargs["soft_targets"]
    assert tuple(probs.shape) == (2, 5) and torch.allclose(probs.sum(1), torch.ones(2)) and bool((probs >= 0).all())


def test_a_data_edit_that_changes_nothing_at_these_inputs_is_not_refuted(tmp_path):
    # The clip of a recurrent cell that the synthesized inputs never reach: equal
    # gradients then say nothing about the inputs that do reach it.
    from detachlint.engine import lint_source
    from detachlint.registry import load_rules
    from detachlint.verify import Verifier, VerifyOptions

    path = tmp_path / "cell.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            class ClippedCell(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 4)
                    self.shift = nn.Parameter(torch.zeros(4))

                def forward(self, x):
                    logits = self.fc(x)
                    logits.data.clamp_(-50.0, 50.0)
                    return torch.tanh(logits) + self.shift
            """
        ),
        encoding="utf-8",
    )
    findings = lint_source(path.read_bytes(), str(path), [load_rules()["DL101"]]).findings
    assert [f.code for f in findings] == ["DL101"]
    verifier = Verifier(VerifyOptions(timeout=5.0))
    verifier.start([str(tmp_path)])
    try:
        (verified,) = verifier.verify(findings, lambda display: path.read_text(encoding="utf-8"))
    finally:
        verifier.close()
    assert verified.verification.status == "inconclusive", verified.verification.evidence
    assert "changed no gradient at these inputs" in verified.verification.evidence


def test_a_legacy_variable_pair_and_data_reads_keep_the_layers_input():
    kwargs = _run(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.autograd import Variable

        class LeNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = nn.Conv2d(3, 6, 5)
                self.conv2 = nn.Conv2d(6, 16, 5)
                self.fc = nn.Linear(16 * 5 * 5, 10)

            def forward(self, x):
                x = F.max_pool2d(F.relu(self.conv1(x)), 2)
                x = F.max_pool2d(F.relu(self.conv2(x)), 2)
                return self.fc(x.view(-1, 16 * 5 * 5))

        class Trainer:
            def __init__(self):
                self.net = LeNet()

            def step(self, feature, label):
                noise = feature.data.new_zeros(feature.size(0), 1)
                feature_v, label_v = Variable(feature.cuda() if torch.cuda.is_available() else feature), Variable(label)
                return F.cross_entropy(self.net(feature_v), label_v) + noise.sum()
        """,
        "Trainer",
        "step",
    )
    assert tuple(kwargs["feature"].shape) == (2, 3, 32, 32)


def test_a_functional_weight_built_in_the_function_fixes_the_width():
    kwargs = _run(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Probe:
            def score(self, features):
                w = nn.Parameter(torch.randn(3, 20) * 0.01)
                logits = F.linear(features, w)
                return F.cross_entropy(logits, torch.zeros(features.size(0), dtype=torch.long))
        """,
        "Probe",
        "score",
    )
    assert tuple(kwargs["features"].shape) == (2, 20)


def test_a_value_that_indexes_rows_is_one_integer_per_row():
    kwargs = _run(
        """
        import torch
        from torch import nn

        class GridEnv:
            def __init__(self):
                self.logsoftmax = nn.LogSoftmax(dim=1)

            def get_logprobs(self, policy_outputs, actions):
                rows = torch.arange(policy_outputs.shape[0])
                return self.logsoftmax(policy_outputs)[rows, actions]
        """,
        "GridEnv",
        "get_logprobs",
    )
    assert kwargs["actions"].dtype == torch.long and tuple(kwargs["actions"].shape) == (2,)
