# source: https://github.com/va1shn9v/PromptIR/issues/6
# category: DL201
# expect: flag 88, 89
# evidence: after Trainer.fit runs PromptIRModel.training_step for a few batches, the prompt_param of all three PromptGenBlocks has grad None and is bit-identical, while their linear_layer/conv3x3 weights train.
"""
PromptIR (net/model.py) and PromptIRModel from train.py, shrunk; lightning is replaced by
a minimal LightningModule/Trainer stand-in that does what trainer.fit does for one optimizer.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class LightningModule(nn.Module):
    current_epoch = 0

    def log(self, name, value):
        self.logged = {name: value.item()}


class Trainer:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, model, train_dataloaders):
        [optimizer], [scheduler] = model.configure_optimizers()
        for epoch in range(self.max_epochs):
            model.current_epoch = epoch
            for batch_idx, batch in enumerate(train_dataloaders):
                loss = model.training_step(batch, batch_idx)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            model.lr_scheduler_step(scheduler)


class TransformerBlock(nn.Module):
    def __init__(self, dim, num_heads=1, ffn_expansion_factor=2, bias=False, LayerNorm_type='WithBias'):
        super(TransformerBlock, self).__init__()
        hidden = int(dim * ffn_expansion_factor)
        self.norm = nn.GroupNorm(1, dim)
        self.ffn = nn.Sequential(nn.Conv2d(dim, hidden, 1, bias=bias), nn.GELU(), nn.Conv2d(hidden, dim, 1, bias=bias))

    def forward(self, x):
        return x + self.ffn(self.norm(x))


class Downsample(nn.Module):
    def __init__(self, n_feat):
        super(Downsample, self).__init__()
        self.body = nn.Sequential(nn.Conv2d(n_feat, n_feat // 2, 3, 1, 1, bias=False), nn.PixelUnshuffle(2))

    def forward(self, x):
        return self.body(x)


class Upsample(nn.Module):
    def __init__(self, n_feat):
        super(Upsample, self).__init__()
        self.body = nn.Sequential(nn.Conv2d(n_feat, n_feat * 2, 3, 1, 1, bias=False), nn.PixelShuffle(2))

    def forward(self, x):
        return self.body(x)


class OverlapPatchEmbed(nn.Module):
    def __init__(self, in_c=3, embed_dim=48, bias=False):
        super(OverlapPatchEmbed, self).__init__()
        self.proj = nn.Conv2d(in_c, embed_dim, kernel_size=3, stride=1, padding=1, bias=bias)

    def forward(self, x):
        return self.proj(x)


##---------- Prompt Gen Module -----------------------
class PromptGenBlock(nn.Module):
    def __init__(self, prompt_dim=128, prompt_len=5, prompt_size=96, lin_dim=192):
        super(PromptGenBlock, self).__init__()
        self.prompt_param = nn.Parameter(torch.rand(1, prompt_len, prompt_dim, prompt_size, prompt_size))
        self.linear_layer = nn.Linear(lin_dim, prompt_len)
        self.conv3x3 = nn.Conv2d(prompt_dim, prompt_dim, kernel_size=3, stride=1, padding=1, bias=False)

    def forward(self, x):
        B, C, H, W = x.shape
        emb = x.mean(dim=(-2, -1))
        prompt_weights = F.softmax(self.linear_layer(emb), dim=1)
        prompt_param = self.prompt_param.data.unsqueeze(0).repeat(B, 1, 1, 1, 1, 1)
        prompt_param = prompt_param.data.squeeze(1)
        prompt_param = prompt_weights.unsqueeze(-1).unsqueeze(-1).unsqueeze(-1) * prompt_param
        prompt_param = torch.sum(prompt_param, dim=1)
        prompt_param = F.interpolate(prompt_param, (H, W), mode="bilinear")
        prompt_param = self.conv3x3(prompt_param)
        return prompt_param


##---------- PromptIR -----------------------
class PromptIR(nn.Module):
    def __init__(self, inp_channels=3, out_channels=3, dim=4, bias=False, decoder=False):
        super(PromptIR, self).__init__()
        self.patch_embed = OverlapPatchEmbed(inp_channels, dim)
        self.decoder = decoder
        if self.decoder:
            self.prompt1 = PromptGenBlock(prompt_dim=8, prompt_len=5, prompt_size=8, lin_dim=dim * 2)
            self.prompt2 = PromptGenBlock(prompt_dim=16, prompt_len=5, prompt_size=4, lin_dim=dim * 4)
            self.prompt3 = PromptGenBlock(prompt_dim=32, prompt_len=5, prompt_size=2, lin_dim=dim * 8)
        self.encoder_level1 = TransformerBlock(dim)
        self.down1_2 = Downsample(dim)
        self.encoder_level2 = TransformerBlock(dim * 2)
        self.down2_3 = Downsample(dim * 2)
        self.encoder_level3 = TransformerBlock(dim * 4)
        self.down3_4 = Downsample(dim * 4)
        self.latent = TransformerBlock(dim * 8)
        self.up4_3 = Upsample(dim * 8)
        self.reduce_chan_level3 = nn.Conv2d(dim * 8, dim * 4, kernel_size=1, bias=bias)
        self.noise_level3 = TransformerBlock(dim * 8 + 32)
        self.reduce_noise_level3 = nn.Conv2d(dim * 8 + 32, dim * 8, kernel_size=1, bias=bias)
        self.decoder_level3 = TransformerBlock(dim * 4)
        self.up3_2 = Upsample(dim * 4)
        self.reduce_chan_level2 = nn.Conv2d(dim * 4, dim * 2, kernel_size=1, bias=bias)
        self.noise_level2 = TransformerBlock(dim * 4 + 16)
        self.reduce_noise_level2 = nn.Conv2d(dim * 4 + 16, dim * 4, kernel_size=1, bias=bias)
        self.decoder_level2 = TransformerBlock(dim * 2)
        self.up2_1 = Upsample(dim * 2)
        self.noise_level1 = TransformerBlock(dim * 2 + 8)
        self.reduce_noise_level1 = nn.Conv2d(dim * 2 + 8, dim * 2, kernel_size=1, bias=bias)
        self.decoder_level1 = TransformerBlock(dim * 2)
        self.refinement = TransformerBlock(dim * 2)
        self.output = nn.Conv2d(dim * 2, out_channels, kernel_size=3, stride=1, padding=1, bias=bias)

    def forward(self, inp_img, noise_emb=None):
        inp_enc_level1 = self.patch_embed(inp_img)
        out_enc_level1 = self.encoder_level1(inp_enc_level1)
        out_enc_level2 = self.encoder_level2(self.down1_2(out_enc_level1))
        out_enc_level3 = self.encoder_level3(self.down2_3(out_enc_level2))
        latent = self.latent(self.down3_4(out_enc_level3))
        if self.decoder:
            dec3_param = self.prompt3(latent)
            latent = torch.cat([latent, dec3_param], 1)
            latent = self.reduce_noise_level3(self.noise_level3(latent))
        inp_dec_level3 = torch.cat([self.up4_3(latent), out_enc_level3], 1)
        out_dec_level3 = self.decoder_level3(self.reduce_chan_level3(inp_dec_level3))
        if self.decoder:
            dec2_param = self.prompt2(out_dec_level3)
            out_dec_level3 = torch.cat([out_dec_level3, dec2_param], 1)
            out_dec_level3 = self.reduce_noise_level2(self.noise_level2(out_dec_level3))
        inp_dec_level2 = torch.cat([self.up3_2(out_dec_level3), out_enc_level2], 1)
        out_dec_level2 = self.decoder_level2(self.reduce_chan_level2(inp_dec_level2))
        if self.decoder:
            dec1_param = self.prompt1(out_dec_level2)
            out_dec_level2 = torch.cat([out_dec_level2, dec1_param], 1)
            out_dec_level2 = self.reduce_noise_level1(self.noise_level1(out_dec_level2))
        inp_dec_level1 = torch.cat([self.up2_1(out_dec_level2), out_enc_level1], 1)
        out_dec_level1 = self.refinement(self.decoder_level1(inp_dec_level1))
        out_dec_level1 = self.output(out_dec_level1) + inp_img
        return out_dec_level1


class PromptIRModel(LightningModule):
    def __init__(self):
        super().__init__()
        self.net = PromptIR(decoder=True)
        self.loss_fn = nn.L1Loss()

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        # training_step defines the train loop.
        # it is independent of forward
        ([clean_name, de_id], degrad_patch, clean_patch) = batch
        restored = self.net(degrad_patch)
        loss = self.loss_fn(restored, clean_patch)
        self.log("train_loss", loss)
        return loss

    def lr_scheduler_step(self, scheduler):
        scheduler.step()

    def configure_optimizers(self):
        optimizer = optim.AdamW(self.parameters(), lr=2e-4)
        scheduler = optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=150)
        return [optimizer], [scheduler]


if __name__ == "__main__":
    torch.manual_seed(0)
    trainloader = []
    for i in range(3):
        clean_patch = torch.rand(2, 3, 16, 16)
        degrad_patch = clean_patch + 0.1 * torch.randn(2, 3, 16, 16)
        trainloader.append(([["img%d" % i] * 2, torch.tensor([0, 1])], degrad_patch, clean_patch))

    model = PromptIRModel()
    prompts = [model.net.prompt1, model.net.prompt2, model.net.prompt3]
    before = [(p.prompt_param.detach().clone(), p.conv3x3.weight.detach().clone()) for p in prompts]
    trainer = Trainer(max_epochs=2)
    trainer.fit(model=model, train_dataloaders=trainloader)

    for p, (param_before, conv_before) in zip(prompts, before):
        assert p.prompt_param.grad is None
        assert p.linear_layer.weight.grad is not None and p.conv3x3.weight.grad is not None
        with torch.no_grad():
            assert torch.equal(param_before, p.prompt_param)
            assert not torch.equal(conv_before, p.conv3x3.weight)
    print("evidence holds: prompt_param of every PromptGenBlock stays untrained (grad None); the rest of the block trains")
