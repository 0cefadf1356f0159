# source: https://github.com/speechbrain/speechbrain/issues/2759
# category: DL201
# expect: flag 68
# evidence: with freeze=False the SSL encoder parameters are in the optimizer but get grad None and never change, only the layer weights train.
import torch
import torch.nn.functional as F


class TinyConfig:
    num_hidden_layers = 3
    hidden_size = 8
    output_hidden_states = False


class TinyEncoderOutput:
    def __init__(self, hidden_states):
        self.hidden_states = hidden_states


class TinyWav2Vec2(torch.nn.Module):
    """Stands in for the HuggingFace wav2vec2 encoder (feature extractor + layers)."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.feature_projection = torch.nn.Linear(16, config.hidden_size)
        self.layers = torch.nn.ModuleList(
            [torch.nn.Linear(config.hidden_size, config.hidden_size) for _ in range(config.num_hidden_layers)]
        )

    def forward(self, wav):
        frames = wav.view(wav.shape[0], -1, 16)
        h = self.feature_projection(frames)
        hidden_states = [h]
        for layer in self.layers:
            h = torch.tanh(layer(h))
            hidden_states.append(h)
        return TinyEncoderOutput(tuple(hidden_states))


class HFTransformersInterface(torch.nn.Module):
    def __init__(self, source, save_path="", freeze=True):
        super().__init__()
        self.config = self.override_config(TinyConfig())
        self.model = TinyWav2Vec2(self.config)
        self.freeze = freeze
        if self.freeze:
            self.model.requires_grad_(False)

    def override_config(self, config):
        return config


class WeightedSSLModel(HFTransformersInterface):
    """Weighted sum of the layer representations of an SSL encoder."""

    def __init__(self, hub, save_path="", layernorm=False, freeze=False):
        super().__init__(source=hub, save_path=save_path, freeze=freeze)
        self.model.eval()
        self.num_layers = self.config.num_hidden_layers + 1
        # Initializing the learnable weights
        zero_init = torch.cat([torch.zeros(self.num_layers)])
        self.weights = torch.nn.Parameter(zero_init, requires_grad=True)
        self.layernorm = layernorm

    def forward(self, wav, wav_lens=None):
        feats = self.model(wav)
        hidden_states = torch.stack(feats.hidden_states, dim=0).detach()
        # First dimension should be equal to the number of layers in the hparams
        assert (
            self.num_layers == hidden_states.shape[0]
        ), "Num layers not equal to num hidden states"
        norm_weights = torch.nn.functional.softmax(self.weights, dim=-1)
        # Layernorming the layers representations if asked
        if self.layernorm:
            hidden_states = [
                F.layer_norm(t, (t.shape[-1],)) for t in hidden_states
            ]
        # Summing the weighted layers
        weighted_feats = (
            hidden_states * norm_weights[:, None, None, None]
        ).sum(axis=0)
        return weighted_feats

    def override_config(self, config):
        config.output_hidden_states = True
        return config


class ASRBrain:
    """Minimal speechbrain-like Brain: ssl encoder + downstream head, one optimizer."""

    def __init__(self, modules, lr=0.1):
        self.modules = modules
        self.optimizer = torch.optim.Adam(
            list(modules["weighted_ssl_model"].parameters()) + list(modules["head"].parameters()), lr=lr
        )

    def compute_forward(self, wavs):
        feats = self.modules["weighted_ssl_model"](wavs)
        return self.modules["head"](feats.mean(dim=1))

    def compute_objectives(self, logits, labels):
        return F.cross_entropy(logits, labels)

    def fit_batch(self, wavs, labels):
        logits = self.compute_forward(wavs)
        loss = self.compute_objectives(logits, labels)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.detach()


if __name__ == "__main__":
    torch.manual_seed(0)
    ssl = WeightedSSLModel("facebook/wav2vec2-base", freeze=False)
    head = torch.nn.Linear(8, 3)
    brain = ASRBrain({"weighted_ssl_model": ssl, "head": head})
    before = {n: p.detach().clone() for n, p in ssl.model.named_parameters()}
    w_before = ssl.weights.detach().clone()
    wavs = torch.randn(4, 64)
    labels = torch.tensor([0, 1, 2, 1])
    for _ in range(3):
        brain.fit_batch(wavs, labels)
    for n, p in ssl.model.named_parameters():
        assert p.requires_grad, n
        assert p.grad is None, n
        assert torch.equal(p.detach(), before[n]), n
    assert ssl.weights.grad is not None
    assert not torch.equal(ssl.weights.detach(), w_before)
    print("evidence holds: unfrozen SSL encoder params get grad None and stay unchanged; only the layer weights train")
