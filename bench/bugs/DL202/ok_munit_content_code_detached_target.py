# source: https://github.com/eriklindernoren/PyTorch-GAN/issues/142
# category: DL202
# expect: clean
# evidence: the content-reconstruction losses detach only their targets (c_code_1, c_code_2); the predictions c_code_12/c_code_21 keep their graph, so loss_c_1 alone sends non-zero gradients into Enc2 and Dec2 and the generator step trains all encoders/decoders.
import itertools
import torch
import torch.nn as nn

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self, in_dim=12, content_dim=6, style_dim=4):
        super().__init__()
        self.content_encoder = nn.Sequential(nn.Linear(in_dim, 16), nn.ReLU(), nn.Linear(16, content_dim))
        self.style_encoder = nn.Sequential(nn.Linear(in_dim, 16), nn.ReLU(), nn.Linear(16, style_dim))

    def forward(self, x):
        return self.content_encoder(x), self.style_encoder(x)


class Decoder(nn.Module):
    def __init__(self, out_dim=12, content_dim=6, style_dim=4):
        super().__init__()
        self.model = nn.Sequential(nn.Linear(content_dim + style_dim, 16), nn.ReLU(), nn.Linear(16, out_dim))

    def forward(self, content_code, style_code):
        return self.model(torch.cat([content_code, style_code], dim=1))


Enc1, Dec1, Enc2, Dec2 = Encoder(), Decoder(), Encoder(), Decoder()
criterion_recon = torch.nn.L1Loss()
lambda_gan, lambda_id, lambda_style, lambda_cont, lambda_cyc = 1, 10, 1, 1, 0
optimizer_G = torch.optim.Adam(itertools.chain(Enc1.parameters(), Dec1.parameters(), Enc2.parameters(), Dec2.parameters()), lr=1e-3)


def generator_step(X1, X2, style_dim=4):
    style_1 = torch.randn(X1.size(0), style_dim)
    style_2 = torch.randn(X1.size(0), style_dim)
    optimizer_G.zero_grad()
    c_code_1, s_code_1 = Enc1(X1)
    c_code_2, s_code_2 = Enc2(X2)
    X11 = Dec1(c_code_1, s_code_1)
    X22 = Dec2(c_code_2, s_code_2)
    X21 = Dec1(c_code_2, style_1)
    X12 = Dec2(c_code_1, style_2)
    c_code_21, s_code_21 = Enc1(X21)
    c_code_12, s_code_12 = Enc2(X12)
    loss_ID_1 = lambda_id * criterion_recon(X11, X1)
    loss_ID_2 = lambda_id * criterion_recon(X22, X2)
    loss_s_1 = lambda_style * criterion_recon(s_code_21, style_1)
    loss_s_2 = lambda_style * criterion_recon(s_code_12, style_2)
    loss_c_1 = lambda_cont * criterion_recon(c_code_12, c_code_1.detach())
    loss_c_2 = lambda_cont * criterion_recon(c_code_21, c_code_2.detach())
    grads_c_1 = torch.autograd.grad(loss_c_1, list(Enc2.content_encoder.parameters()) + list(Dec2.parameters()), retain_graph=True)
    loss_G = loss_ID_1 + loss_ID_2 + loss_s_1 + loss_s_2 + loss_c_1 + loss_c_2
    loss_G.backward()
    optimizer_G.step()
    return grads_c_1


if __name__ == "__main__":
    before = [p.detach().clone() for p in itertools.chain(Enc1.parameters(), Dec1.parameters(), Enc2.parameters(), Dec2.parameters())]
    grads_c_1 = generator_step(torch.randn(5, 12), torch.randn(5, 12))
    assert any(g.abs().sum().item() > 0 for g in grads_c_1)
    after = list(itertools.chain(Enc1.parameters(), Dec1.parameters(), Enc2.parameters(), Dec2.parameters()))
    assert all(not torch.equal(a.detach(), b) for a, b in zip(after, before))
    print("evidence holds: loss_c_1 alone reaches Enc2/Dec2 and the generator step changes every encoder/decoder weight")
