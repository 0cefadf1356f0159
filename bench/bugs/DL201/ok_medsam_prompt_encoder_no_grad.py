# source: https://github.com/bowang-lab/MedSAM/issues/233
# category: DL201
# expect: clean
# evidence: only the frozen prompt encoder runs under torch.no_grad(); the optimizer holds image_encoder + mask_decoder parameters, which all get gradients and change, while the prompt encoder (not optimized) stays as loaded
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)


class ImageEncoderViT(nn.Module):
    def __init__(self, embed_dim=16):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, embed_dim, kernel_size=8, stride=8)
        self.neck = nn.Sequential(nn.Conv2d(embed_dim, embed_dim, 1), nn.GELU(), nn.Conv2d(embed_dim, embed_dim, 3, padding=1))

    def forward(self, x):
        return self.neck(self.patch_embed(x))


class PromptEncoder(nn.Module):
    def __init__(self, embed_dim=16, image_embedding_size=(8, 8), input_image_size=(64, 64)):
        super().__init__()
        self.embed_dim = embed_dim
        self.image_embedding_size = image_embedding_size
        self.input_image_size = input_image_size
        self.pe_layer = nn.Parameter(torch.randn(2, embed_dim // 2))
        self.point_embeddings = nn.ModuleList([nn.Embedding(1, embed_dim) for _ in range(4)])
        self.no_mask_embed = nn.Embedding(1, embed_dim)

    def _pe_encoding(self, coords):
        coords = 2 * coords - 1
        coords = coords @ self.pe_layer
        coords = 2 * np.pi * coords
        return torch.cat([torch.sin(coords), torch.cos(coords)], dim=-1)

    def get_dense_pe(self):
        h, w = self.image_embedding_size
        grid = torch.ones((h, w))
        y_embed = (grid.cumsum(dim=0) - 0.5) / h
        x_embed = (grid.cumsum(dim=1) - 0.5) / w
        pe = self._pe_encoding(torch.stack([x_embed, y_embed], dim=-1))
        return pe.permute(2, 0, 1).unsqueeze(0)

    def _embed_boxes(self, boxes):
        boxes = boxes + 0.5
        coords = boxes.reshape(-1, 2, 2)
        coords = coords / torch.tensor([self.input_image_size[1], self.input_image_size[0]], dtype=torch.float32)
        corner_embedding = self._pe_encoding(coords)
        corner_embedding[:, 0, :] += self.point_embeddings[2].weight
        corner_embedding[:, 1, :] += self.point_embeddings[3].weight
        return corner_embedding

    def forward(self, points, boxes, masks):
        bs = boxes.shape[0]
        sparse_embeddings = self._embed_boxes(boxes).view(bs, -1, self.embed_dim)
        dense_embeddings = self.no_mask_embed.weight.reshape(1, -1, 1, 1).expand(
            bs, -1, self.image_embedding_size[0], self.image_embedding_size[1])
        return sparse_embeddings, dense_embeddings


class MaskDecoder(nn.Module):
    def __init__(self, transformer_dim=16):
        super().__init__()
        self.mask_tokens = nn.Embedding(1, transformer_dim)
        self.attn = nn.MultiheadAttention(transformer_dim, 2, batch_first=True)
        self.output_upscaling = nn.Sequential(
            nn.ConvTranspose2d(transformer_dim, transformer_dim // 2, 2, 2), nn.GELU(),
            nn.ConvTranspose2d(transformer_dim // 2, transformer_dim // 4, 2, 2))
        self.hyper_mlp = nn.Linear(transformer_dim, transformer_dim // 4)

    def forward(self, image_embeddings, image_pe, sparse_prompt_embeddings, dense_prompt_embeddings, multimask_output):
        b = image_embeddings.shape[0]
        tokens = torch.cat([self.mask_tokens.weight.unsqueeze(0).expand(b, -1, -1), sparse_prompt_embeddings], dim=1)
        src = image_embeddings + dense_prompt_embeddings
        pos = image_pe.expand(b, -1, -1, -1)
        keys = (src + pos).flatten(2).transpose(1, 2)
        hs, _ = self.attn(tokens, keys, keys)
        upscaled = self.output_upscaling(src)
        hyper_in = self.hyper_mlp(hs[:, 0, :])
        masks = (hyper_in[:, :, None, None] * upscaled).sum(1, keepdim=True)
        return masks, None


class MedSAM(nn.Module):
    def __init__(self, image_encoder, mask_decoder, prompt_encoder):
        super().__init__()
        self.image_encoder = image_encoder
        self.mask_decoder = mask_decoder
        self.prompt_encoder = prompt_encoder
        # freeze prompt encoder
        for param in self.prompt_encoder.parameters():
            param.requires_grad = False

    def forward(self, image, box):
        image_embedding = self.image_encoder(image)  # (B, 256, 64, 64)
        # do not compute gradients for prompt encoder
        with torch.no_grad():
            box_torch = torch.as_tensor(box, dtype=torch.float32, device=image.device)
            if len(box_torch.shape) == 2:
                box_torch = box_torch[:, None, :]  # (B, 1, 4)

            sparse_embeddings, dense_embeddings = self.prompt_encoder(
                points=None,
                boxes=box_torch,
                masks=None,
            )
        low_res_masks, _ = self.mask_decoder(
            image_embeddings=image_embedding,  # (B, 256, 64, 64)
            image_pe=self.prompt_encoder.get_dense_pe(),  # (1, 256, 64, 64)
            sparse_prompt_embeddings=sparse_embeddings,  # (B, 2, 256)
            dense_prompt_embeddings=dense_embeddings,  # (B, 256, 64, 64)
            multimask_output=False,
        )
        ori_res_masks = F.interpolate(
            low_res_masks,
            size=(image.shape[2], image.shape[3]),
            mode="bilinear",
            align_corners=False,
        )
        return ori_res_masks


def dice_loss(pred, target, eps=1e-5):
    pred = torch.sigmoid(pred)
    inter = (pred * target).sum((1, 2, 3))
    return (1 - (2 * inter + eps) / (pred.sum((1, 2, 3)) + target.sum((1, 2, 3)) + eps)).mean()


if __name__ == "__main__":
    medsam_model = MedSAM(image_encoder=ImageEncoderViT(), mask_decoder=MaskDecoder(), prompt_encoder=PromptEncoder())
    medsam_model.train()
    img_mask_encdec_params = list(medsam_model.image_encoder.parameters()) + list(medsam_model.mask_decoder.parameters())
    optimizer = torch.optim.AdamW(img_mask_encdec_params, lr=1e-3, weight_decay=0.01)
    seg_loss = dice_loss
    ce_loss = nn.BCEWithLogitsLoss(reduction="mean")

    before = [p.detach().clone() for p in img_mask_encdec_params]
    prompt_before = [p.detach().clone() for p in medsam_model.prompt_encoder.parameters()]
    for step in range(2):
        image = torch.rand(2, 3, 64, 64)
        gt2D = (torch.rand(2, 1, 64, 64) > 0.5).float()
        boxes_np = np.array([[8, 8, 40, 40], [16, 12, 50, 60]], dtype=np.float32)
        optimizer.zero_grad()
        medsam_pred = medsam_model(image, boxes_np)
        loss = seg_loss(medsam_pred, gt2D) + ce_loss(medsam_pred, gt2D.float())
        loss.backward()
        assert all(p.grad is not None for p in img_mask_encdec_params)
        optimizer.step()
    assert all(not torch.equal(b, p.detach()) for b, p in zip(before, img_mask_encdec_params))
    assert all(torch.equal(b, p.detach()) for b, p in zip(prompt_before, medsam_model.prompt_encoder.parameters()))
    print("evidence holds: all %d image-encoder/mask-decoder tensors get gradients and change; "
          "the frozen prompt encoder stays as loaded" % len(before))
