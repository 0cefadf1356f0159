# source: https://github.com/RupertLuo/Valley/issues/13
# category: DL201
# expect: flag 60, 63
# evidence: with tune_mm_mlp_adapter=True the optimizer holds mm_projector, yet its weight.grad stays None and the weights never change because the projector runs inside torch.no_grad().
import torch
import torch.nn as nn
import torch.nn.functional as F
from dataclasses import dataclass


@dataclass
class TrainingArguments:
    tune_mm_mlp_adapter: bool = True
    freeze_backbone: bool = True
    learning_rate: float = 2e-3
    max_steps: int = 3


class ValleyConfig:
    vocab_size = 40
    hidden_size = 16
    mm_hidden_size = 12
    mm_vision_select_layer = -2
    patch_pooling = "mean"
    im_start_token = 38
    im_patch_token = 39


class CLIPVisionModel(nn.Module):
    """tiny stand-in: returns hidden_states like transformers' CLIP vision tower"""
    def __init__(self, config):
        super().__init__()
        self.patch = nn.Linear(3 * 4 * 4, config.mm_hidden_size)
        self.layers = nn.ModuleList([nn.Linear(config.mm_hidden_size, config.mm_hidden_size) for _ in range(2)])

    def forward(self, images, output_hidden_states=True):
        x = images.unfold(2, 4, 4).unfold(3, 4, 4).permute(0, 2, 3, 1, 4, 5).flatten(3).flatten(1, 2)
        h = self.patch(x)
        h = torch.cat([h.mean(1, keepdim=True), h], dim=1)  # CLS + patches
        hidden_states = [h]
        for layer in self.layers:
            h = torch.tanh(layer(h))
            hidden_states.append(h)
        return type("Out", (), {"hidden_states": hidden_states})()


class ValleyLlamaModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList([nn.Linear(config.hidden_size, config.hidden_size) for _ in range(2)])
        self.vision_tower = [CLIPVisionModel(config)]
        self.mm_projector = nn.Linear(config.mm_hidden_size, config.hidden_size)

    def forward(self, input_ids, images=None):
        inputs_embeds = self.embed_tokens(input_ids)
        vision_tower = self.vision_tower[0]
        if images is not None:
            with torch.no_grad():
                image_forward_outs = vision_tower(images, output_hidden_states=True)
                select_hidden_state = image_forward_outs.hidden_states[self.config.mm_vision_select_layer]
                image_features = self.mm_projector(select_hidden_state)
            dummy_image_features = torch.zeros(4, self.config.mm_hidden_size, dtype=inputs_embeds.dtype)
            dummy_image_features = self.mm_projector(dummy_image_features)
            new_input_embeds = []
            for cur_input_ids, cur_input_embeds, cur_image_features in zip(input_ids, inputs_embeds, image_features):
                if (cur_input_ids == self.config.im_patch_token).sum() == 0:
                    cur_input_embeds = cur_input_embeds + (0. * dummy_image_features).sum()
                    new_input_embeds.append(cur_input_embeds)
                    continue
                if self.config.patch_pooling == "mean":
                    cur_patch_features = cur_image_features[1:, :].mean(0, keepdim=True)
                    cur_frame_features = cur_image_features[0:1, :]
                    cur_image_features = torch.cat([cur_frame_features, cur_patch_features], dim=0)
                image_start_token_pos = torch.where(cur_input_ids == self.config.im_start_token)[0][0]
                num_patches = cur_image_features.shape[0]
                cur_new_input_embeds = torch.cat((cur_input_embeds[:image_start_token_pos + 1],
                                                  cur_image_features,
                                                  cur_input_embeds[image_start_token_pos + num_patches + 1:]), dim=0)
                new_input_embeds.append(cur_new_input_embeds)
            inputs_embeds = torch.stack(new_input_embeds, dim=0)
        hidden_states = inputs_embeds
        for layer in self.layers:
            hidden_states = hidden_states + torch.tanh(layer(hidden_states))
        return hidden_states


class ValleyLlamaForCausalLM(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.model = ValleyLlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, input_ids, labels=None, images=None):
        hidden_states = self.model(input_ids, images=images)
        logits = self.lm_head(hidden_states)
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        loss = F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1), ignore_index=-100)
        return {"loss": loss, "logits": logits}


def make_batch(config, bsz=2, seq=10):
    input_ids = torch.randint(0, 30, (bsz, seq))
    input_ids[:, 1] = config.im_start_token
    input_ids[:, 2:4] = config.im_patch_token
    labels = input_ids.clone()
    labels[:, :4] = -100
    images = torch.randn(bsz, 3, 8, 8)
    return dict(input_ids=input_ids, labels=labels, images=images)


def train(training_args):
    config = ValleyConfig()
    model = ValleyLlamaForCausalLM(config)
    if training_args.freeze_backbone:
        model.model.requires_grad_(False)
    if training_args.tune_mm_mlp_adapter:
        model.requires_grad_(False)
        for p in model.model.mm_projector.parameters():
            p.requires_grad = True
        for p in model.get_input_embeddings().parameters():
            p.requires_grad = True
        for p in model.get_output_embeddings().parameters():
            p.requires_grad = False
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=training_args.learning_rate)
    for step in range(training_args.max_steps):
        batch = make_batch(config)
        outputs = model(**batch)
        outputs["loss"].backward()
        if step == training_args.max_steps - 1:
            break  # keep the last gradients to inspect them
        optimizer.step()
        optimizer.zero_grad()
    return model, optimizer


if __name__ == "__main__":
    torch.manual_seed(0)
    training_args = TrainingArguments()
    config = ValleyConfig()
    torch.manual_seed(0)
    ref = ValleyLlamaForCausalLM(config)
    torch.manual_seed(0)
    model, optimizer = train(training_args)
    proj = model.model.mm_projector
    assert any(p is proj.weight for g in optimizer.param_groups for p in g["params"])
    assert proj.weight.requires_grad
    # every sample has image patches, so only the no_grad path is used
    with torch.no_grad():
        assert proj.weight.grad is None
        assert torch.equal(proj.weight, ref.model.mm_projector.weight)
        assert float((model.model.embed_tokens.weight - ref.model.embed_tokens.weight).abs().sum()) > 0
    print("evidence holds: mm_projector is in the optimizer but gets no gradient and never changes; embed_tokens does train")
