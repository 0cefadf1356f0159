# source: https://github.com/facebookresearch/fairseq/blob/main/fairseq/models/wav2vec/wav2vec2_asr.py
# category: DL304
# expect: clean
# evidence: the no_grad chosen by a conditional expression is entered by `with`: the pretrained encoder gets no gradient before freeze_finetune_updates and does after
import contextlib
from types import SimpleNamespace

import torch
from torch import nn
import torch.nn.functional as F


class Wav2Vec2Model(nn.Module):
    def __init__(self, embed_dim=16):
        super().__init__()
        self.feature_extractor = nn.Conv1d(1, embed_dim, kernel_size=5, stride=2)
        self.encoder = nn.Linear(embed_dim, embed_dim)

    def extract_features(self, source, padding_mask, mask=False):
        x = self.feature_extractor(source.unsqueeze(1)).transpose(1, 2)  # B x T x C
        x = torch.relu(self.encoder(x))
        return {"x": x, "padding_mask": padding_mask}


class Wav2VecEncoder(nn.Module):
    def __init__(self, cfg, output_size=None):
        super().__init__()
        self.apply_mask = cfg.apply_mask
        self.w2v_model = Wav2Vec2Model(cfg.encoder_embed_dim)
        self.final_dropout = nn.Dropout(cfg.final_dropout)
        self.freeze_finetune_updates = cfg.freeze_finetune_updates
        self.num_updates = 0
        self.proj = nn.Linear(cfg.encoder_embed_dim, output_size) if output_size is not None else None

    def set_num_updates(self, num_updates):
        """Set the number of parameters updates."""
        self.num_updates = num_updates

    def forward(self, source, padding_mask, **kwargs):
        w2v_args = {
            "source": source,
            "padding_mask": padding_mask,
            "mask": self.apply_mask and self.training,
        }

        ft = self.freeze_finetune_updates <= self.num_updates

        with torch.no_grad() if not ft else contextlib.ExitStack():
            res = self.w2v_model.extract_features(**w2v_args)

            x = res["x"]
            padding_mask = res["padding_mask"]

            # B x T x C -> T x B x C
            x = x.transpose(0, 1)

        x = self.final_dropout(x)

        if self.proj:
            x = self.proj(x)

        return {
            "encoder_out": x,  # T x B x C
            "encoder_padding_mask": padding_mask,  # B x T
            "padding_mask": padding_mask,
        }


def train_step(encoder, optimizer, source, targets, num_updates):
    encoder.train()
    encoder.set_num_updates(num_updates)
    optimizer.zero_grad(set_to_none=True)
    net_output = encoder(source, padding_mask=None)
    lprobs = F.log_softmax(net_output["encoder_out"], dim=-1)
    loss = F.nll_loss(lprobs.reshape(-1, lprobs.shape[-1]), targets.reshape(-1))
    loss.backward()
    grads = {
        "w2v": encoder.w2v_model.encoder.weight.grad is not None,
        "proj": encoder.proj.weight.grad is not None,
    }
    optimizer.step()
    return loss.item(), grads


if __name__ == "__main__":
    torch.manual_seed(0)
    cfg = SimpleNamespace(apply_mask=False, encoder_embed_dim=16, final_dropout=0.0, freeze_finetune_updates=2)
    encoder = Wav2VecEncoder(cfg, output_size=5)
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    source = torch.randn(2, 40)
    T = encoder(source, None)["encoder_out"].shape[0]
    targets = torch.randint(0, 5, (T, 2))
    seen = [train_step(encoder, optimizer, source, targets, n)[1] for n in range(4)]
    assert [g["w2v"] for g in seen] == [False, False, True, True]
    assert all(g["proj"] for g in seen)
    print("evidence holds: encoder frozen for 2 updates (no grad), fine-tuned after; the head always trains")
