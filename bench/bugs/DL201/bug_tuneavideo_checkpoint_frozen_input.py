# source: https://github.com/showlab/Tune-A-Video/issues/69
# category: DL201
# expect: flag 43
# evidence: the trainable temporal-attention weights (attn_temp) of the down block, owned by the optimizer, keep grad None and never change because the block runs them through reentrant checkpoint on an input that does not require grad; the mid block's attn_temp (no checkpoint) does get gradients.
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint

torch.manual_seed(0)


class TransformerTemporal(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attn1 = nn.Linear(dim, dim)          # pretrained spatial attention: frozen
        self.attn_temp = nn.Linear(dim, dim)      # new temporal attention: trainable

    def forward(self, hidden_states, encoder_hidden_states, return_dict=False):
        hidden_states = hidden_states + self.attn1(hidden_states)
        hidden_states = hidden_states + self.attn_temp(hidden_states) + 0 * encoder_hidden_states.mean()
        return (hidden_states,)


class CrossAttnDownBlock3D(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.resnets = nn.ModuleList([nn.Linear(dim, dim)])
        self.attentions = nn.ModuleList([TransformerTemporal(dim)])
        self.gradient_checkpointing = False

    def forward(self, hidden_states, encoder_hidden_states=None):
        for resnet, attn in zip(self.resnets, self.attentions):
            if self.training and self.gradient_checkpointing:
                def create_custom_forward(module, return_dict=None):
                    def custom_forward(*inputs):
                        if return_dict is not None:
                            return module(*inputs, return_dict=return_dict)
                        return module(*inputs)
                    return custom_forward

                hidden_states = torch.utils.checkpoint.checkpoint(create_custom_forward(resnet), hidden_states, use_reentrant=True)
                hidden_states = torch.utils.checkpoint.checkpoint(create_custom_forward(attn, return_dict=False), hidden_states, encoder_hidden_states, use_reentrant=True)[0]
            else:
                hidden_states = resnet(hidden_states)
                hidden_states = attn(hidden_states, encoder_hidden_states, return_dict=False)[0]
        return hidden_states


class UNet3DConditionModel(nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.conv_in = nn.Linear(dim, dim)
        self.down_blocks = nn.ModuleList([CrossAttnDownBlock3D(dim)])
        self.mid_block = TransformerTemporal(dim)
        self.conv_out = nn.Linear(dim, dim)

    def enable_gradient_checkpointing(self):
        for block in self.down_blocks:
            block.gradient_checkpointing = True

    def forward(self, sample, encoder_hidden_states):
        sample = self.conv_in(sample)
        for block in self.down_blocks:
            sample = block(sample, encoder_hidden_states)
        sample = self.mid_block(sample, encoder_hidden_states)[0]
        return self.conv_out(sample)


if __name__ == "__main__":
    import warnings
    warnings.filterwarnings("ignore")
    unet = UNet3DConditionModel()
    unet.requires_grad_(False)
    trainable_modules = ("attn_temp",)
    for name, module in unet.named_modules():
        if name.endswith(tuple(trainable_modules)):
            for params in module.parameters():
                params.requires_grad = True
    unet.enable_gradient_checkpointing()
    unet.train()
    optimizer = torch.optim.AdamW([p for p in unet.parameters() if p.requires_grad], lr=1e-2)
    down_w0 = unet.down_blocks[0].attentions[0].attn_temp.weight.detach().clone()
    mid_w0 = unet.mid_block.attn_temp.weight.detach().clone()
    for step in range(3):
        latents = torch.randn(4, 8)
        encoder_hidden_states = torch.randn(4, 8)
        target = torch.randn(4, 8)
        model_pred = unet(latents, encoder_hidden_states)
        loss = F.mse_loss(model_pred.float(), target.float(), reduction="mean")
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
    down_attn_temp = unet.down_blocks[0].attentions[0].attn_temp
    assert down_attn_temp.weight.grad is None
    assert torch.equal(down_attn_temp.weight.detach(), down_w0)
    assert unet.mid_block.attn_temp.weight.grad is not None
    assert not torch.equal(unet.mid_block.attn_temp.weight.detach(), mid_w0)
    print("evidence holds: down-block attn_temp (in the optimizer) gets no gradient through reentrant checkpoint and never changes; mid-block attn_temp trains")
