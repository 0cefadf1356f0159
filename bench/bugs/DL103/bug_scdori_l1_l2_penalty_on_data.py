# source: https://github.com/bioFAM/scDORI/issues/19
# category: DL103
# expect: flag 51, 52, 54, 55, 57, 58
# evidence: the decoder gradients are bit-identical with every L1/L2 penalty at 0 and at 10 (the norms of .data are constants), while the same penalty on the tracked parameter has a gradient above 10 per entry
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F


class scDoRI(nn.Module):
    """Tiny stand-in: topics decode ATAC peaks and TF expression; genes read peaks."""

    def __init__(self, num_peaks=12, num_tfs=5, num_genes=6, num_topics=3):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(num_peaks + num_tfs, 8), nn.ReLU(), nn.Linear(8, num_topics))
        self.topic_peak_decoder = nn.Parameter(torch.randn(num_topics, num_peaks))
        self.topic_tf_decoder = nn.Parameter(torch.randn(num_topics, num_tfs))
        self.gene_peak_factor_learnt = nn.Parameter(torch.rand(num_genes, num_peaks))

    def forward(self, atac_input, tf_input):
        theta = F.softmax(self.encoder(torch.cat([atac_input, tf_input], dim=1)), dim=-1)
        preds_atac = F.softmax(theta @ self.topic_peak_decoder, dim=-1)
        preds_tf = F.softplus(theta @ self.topic_tf_decoder)
        preds_rna = F.softplus(preds_atac @ self.gene_peak_factor_learnt.t())
        return {"preds_atac": preds_atac, "mu_tf": preds_tf, "mu_rna": preds_rna}


def get_loss_weights_scdori(phase, config_file):
    if phase == "warmup_1":
        return {"atac": config_file.weight_atac_phase1, "tf": config_file.weight_tf_phase1, "rna": config_file.weight_rna_phase1}
    return {"atac": config_file.weight_atac_phase2, "tf": config_file.weight_tf_phase2, "rna": config_file.weight_rna_phase2}


def train_scdori_phases(model, train_loader, config_file, optimizer, phase="warmup_1"):
    weights = get_loss_weights_scdori(phase, config_file)
    model.train()
    running_loss = 0.0
    for atac_input, tf_input, rna_input, log_lib_atac in train_loader:
        out = model(atac_input, tf_input)

        # 1) ATAC => Poisson
        preds_poisson = out["preds_atac"] * torch.exp(log_lib_atac)
        loss_atac = nn.PoissonNLLLoss(log_input=False, reduction="sum")(preds_poisson, atac_input)
        # 2) TF and 3) RNA => Poisson stand-ins for the NB likelihoods
        loss_tf = nn.PoissonNLLLoss(log_input=False)(out["mu_tf"], tf_input)
        loss_rna = nn.PoissonNLLLoss(log_input=False)(out["mu_rna"], rna_input)

        # Regularization
        l1_norm_tf = torch.norm(model.topic_tf_decoder.data, p=1)
        l2_norm_tf = torch.norm(model.topic_tf_decoder.data, p=2)

        l1_norm_peak = torch.norm(model.topic_peak_decoder.data, p=1)
        l2_norm_peak = torch.norm(model.topic_peak_decoder.data, p=2)

        l1_norm_gene_peak = torch.norm(model.gene_peak_factor_learnt.data, p=1)
        l2_norm_gene_peak = torch.norm(model.gene_peak_factor_learnt.data, p=2)

        loss_norm = (
            config_file.l1_penalty_topic_tf * l1_norm_tf
            + config_file.l2_penalty_topic_tf * l2_norm_tf
            + config_file.l1_penalty_topic_peak * l1_norm_peak
            + config_file.l2_penalty_topic_peak * l2_norm_peak
            + config_file.l1_penalty_gene_peak * l1_norm_gene_peak
            + config_file.l2_penalty_gene_peak * l2_norm_gene_peak
        )
        total_loss = weights["atac"] * loss_atac + weights["tf"] * loss_tf + weights["rna"] * loss_rna + loss_norm

        optimizer.zero_grad()
        total_loss.backward()
        optimizer.step()
        running_loss += total_loss.item()

        # Clamp gene-peak factors to [0, 1]
        model.gene_peak_factor_learnt.data.clamp_(min=0)
        model.gene_peak_factor_learnt.data.clamp_(max=1)
    return running_loss


def make_config(penalty):
    return SimpleNamespace(
        weight_atac_phase1=1.0, weight_tf_phase1=1.0, weight_rna_phase1=0.0,
        weight_atac_phase2=1.0, weight_tf_phase2=1.0, weight_rna_phase2=1.0,
        l1_penalty_topic_tf=penalty, l2_penalty_topic_tf=penalty,
        l1_penalty_topic_peak=penalty, l2_penalty_topic_peak=penalty,
        l1_penalty_gene_peak=penalty, l2_penalty_gene_peak=penalty,
    )


def decoder_grads_after_one_batch(penalty, batch, phase):
    torch.manual_seed(0)
    model = scDoRI()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    train_scdori_phases(model, [batch], make_config(penalty), optimizer, phase)
    return [p.grad.clone() for p in (model.topic_tf_decoder, model.topic_peak_decoder, model.gene_peak_factor_learnt)]


if __name__ == "__main__":
    torch.manual_seed(0)
    batch = (torch.poisson(torch.full((4, 12), 2.0)), torch.poisson(torch.full((4, 5), 3.0)),
             torch.poisson(torch.full((4, 6), 1.0)), torch.zeros(4, 1))

    for phase in ("warmup_1", "warmup_2"):
        no_penalty = decoder_grads_after_one_batch(0.0, batch, phase)
        big_penalty = decoder_grads_after_one_batch(10.0, batch, phase)
        for g0, g10 in zip(no_penalty, big_penalty):
            assert torch.equal(g0, g10), "L1/L2 penalties should have had an effect"

    # the same penalty on the tracked parameters does reach them
    torch.manual_seed(0)
    model = scDoRI()
    tracked = 10.0 * (torch.norm(model.topic_tf_decoder, p=1) + torch.norm(model.topic_tf_decoder, p=2))
    penalty_grad, = torch.autograd.grad(tracked, [model.topic_tf_decoder])
    assert penalty_grad.abs().min().item() > 10.0
    assert not torch.allclose(no_penalty[0] + penalty_grad, no_penalty[0])
    print("evidence holds: decoder gradients are identical with penalties 0 and 10; the tracked penalty would add a gradient of magnitude >10 per entry")
