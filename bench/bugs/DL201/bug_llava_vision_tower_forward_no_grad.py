# source: https://github.com/haotian-liu/LLaVA/issues/1449
# category: DL201
# expect: flag 55
# evidence: after unfreezing the vision tower and adding it to the optimizer, its parameters still get grad None and never change, because CLIPVisionTower.forward is decorated with @torch.no_grad().
from types import SimpleNamespace

import torch
import torch.nn as nn


class CLIPVisionModelLike(nn.Module):
    """Stand-in for transformers.CLIPVisionModel: patch embed + two encoder layers."""

    def __init__(self, hidden_size=16, patch=4):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, hidden_size, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, hidden_size))
        self.layers = nn.ModuleList([nn.Linear(hidden_size, hidden_size) for _ in range(2)])

    def forward(self, pixel_values, output_hidden_states=True):
        x = self.patch_embed(pixel_values).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1)
        hidden_states = [x]
        for layer in self.layers:
            x = x + torch.tanh(layer(x))
            hidden_states.append(x)
        return SimpleNamespace(last_hidden_state=x, hidden_states=tuple(hidden_states))


class CLIPVisionTower(nn.Module):
    def __init__(self, vision_tower, args, delay_load=False):
        super().__init__()
        self.is_loaded = False
        self.vision_tower_name = vision_tower
        self.select_layer = args.mm_vision_select_layer
        self.select_feature = getattr(args, 'mm_vision_select_feature', 'patch')
        if not delay_load:
            self.load_model()

    def load_model(self):
        self.vision_tower = CLIPVisionModelLike()
        self.vision_tower.requires_grad_(False)
        self.is_loaded = True

    def feature_select(self, image_forward_outs):
        image_features = image_forward_outs.hidden_states[self.select_layer]
        if self.select_feature == 'patch':
            image_features = image_features[:, 1:]
        elif self.select_feature == 'cls_patch':
            image_features = image_features
        else:
            raise ValueError(f'Unexpected select feature: {self.select_feature}')
        return image_features

    @torch.no_grad()
    def forward(self, images):
        if type(images) is list:
            image_features = []
            for image in images:
                image_forward_out = self.vision_tower(image.unsqueeze(0), output_hidden_states=True)
                image_feature = self.feature_select(image_forward_out).to(image.dtype)
                image_features.append(image_feature)
        else:
            image_forward_outs = self.vision_tower(images, output_hidden_states=True)
            image_features = self.feature_select(image_forward_outs).to(images.dtype)
        return image_features


class LlavaLike(nn.Module):
    def __init__(self, args, vocab=20, d_model=24):
        super().__init__()
        self.vision_tower = CLIPVisionTower('openai/clip-vit-large-patch14-336', args)
        self.mm_projector = nn.Sequential(nn.Linear(16, d_model), nn.GELU(), nn.Linear(d_model, d_model))
        self.lm_head = nn.Linear(d_model, vocab)

    def get_vision_tower(self):
        return self.vision_tower

    def encode_images(self, images):
        image_features = self.get_vision_tower()(images)
        image_features = self.mm_projector(image_features)
        return image_features

    def forward(self, images, labels):
        feats = self.encode_images(images)
        logits = self.lm_head(feats.mean(1))
        return nn.functional.cross_entropy(logits, labels)


if __name__ == "__main__":
    torch.manual_seed(0)
    model_args = SimpleNamespace(mm_vision_select_layer=-2, mm_vision_select_feature='patch',
                                 unfreeze_mm_vision_tower=True)
    model = LlavaLike(model_args)
    if model_args.unfreeze_mm_vision_tower:
        model.get_vision_tower().vision_tower.requires_grad_(True)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)

    tower_params = list(model.get_vision_tower().parameters())
    tower_before = [p.detach().clone() for p in tower_params]
    proj_before = [p.detach().clone() for p in model.mm_projector.parameters()]
    for step in range(3):
        images, labels = torch.randn(2, 3, 8, 8), torch.randint(0, 20, (2,))
        loss = model(images, labels)
        optimizer.zero_grad()
        loss.backward()
        assert all(p.requires_grad and p.grad is None for p in tower_params)
        optimizer.step()
    with torch.no_grad():
        assert all(torch.equal(a, p) for a, p in zip(tower_before, tower_params))
        assert any(not torch.equal(a, p) for a, p in zip(proj_before, model.mm_projector.parameters()))
    print("evidence holds: the unfrozen vision tower gets grad None under the @torch.no_grad() forward and never changes")
