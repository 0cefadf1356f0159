# source: https://github.com/mazurowski-lab/finetune-SAM/issues/26
# category: DL505
# expect: flag 79
# evidence: with finetune_type 'adapter' but no adapter layers every SAM parameter is frozen, and `loss.requires_grad = True` silences the backward error, so after several optimizer steps no parameter has changed.
import torch
from torch import nn
import torch.optim as optim
from argparse import Namespace


class ImageEncoderViT(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, 8, 4, stride=4)
        self.Adapter = nn.Linear(8, 8) if args.if_encoder_adapter else None

    def forward(self, x):
        x = self.patch_embed(x)
        if self.Adapter is not None:
            x = x + self.Adapter(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return x


class PromptEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.no_mask_embed = nn.Embedding(1, 8)

    def forward(self, points=None, boxes=None, masks=None):
        sparse = torch.zeros(1, 0, 8)
        dense = self.no_mask_embed.weight.view(1, 8, 1, 1)
        return sparse, dense

    def get_dense_pe(self):
        return torch.zeros(1, 8, 1, 1)


class MaskDecoder(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.output_upscaling = nn.ConvTranspose2d(8, num_classes, 4, stride=4)

    def forward(self, image_embeddings, image_pe, sparse_prompt_embeddings,
                dense_prompt_embeddings, multimask_output=True):
        x = image_embeddings + image_pe + dense_prompt_embeddings
        return self.output_upscaling(x), None


class Sam(nn.Module):
    def __init__(self, args, num_classes):
        super().__init__()
        self.image_encoder = ImageEncoderViT(args)
        self.prompt_encoder = PromptEncoder()
        self.mask_decoder = MaskDecoder(num_classes)


def train_model(trainloader, args, epochs):
    sam = Sam(args, num_classes=args.num_cls)
    if args.finetune_type == 'adapter':
        for n, value in sam.named_parameters():
            if "Adapter" not in n:  # only update parameters in adapter
                value.requires_grad = False
    optimizer = optim.AdamW(sam.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-08, weight_decay=0.1)
    optimizer.zero_grad()
    criterion2 = nn.CrossEntropyLoss()
    before = {n: p.detach().clone() for n, p in sam.named_parameters()}
    losses = []
    for epoch in range(epochs):
        sam.train()
        for i, data in enumerate(trainloader):
            imgs, msks = data['image'], data['mask']
            with torch.no_grad():
                img_emb = sam.image_encoder(imgs)
            sparse_emb, dense_emb = sam.prompt_encoder(points=None, boxes=None, masks=None)
            pred, _ = sam.mask_decoder(image_embeddings=img_emb, image_pe=sam.prompt_encoder.get_dense_pe(),
                                       sparse_prompt_embeddings=sparse_emb, dense_prompt_embeddings=dense_emb,
                                       multimask_output=True)
            loss = criterion2(pred, torch.squeeze(msks.long(), 1))
            loss.requires_grad = True
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
    return sam, before, losses


if __name__ == "__main__":
    torch.manual_seed(0)
    args = Namespace(finetune_type='adapter', if_encoder_adapter=False, if_mask_decoder_adapter=False,
                     if_update_encoder=False, num_cls=2, lr=1e-2)
    trainloader = [{'image': torch.randn(2, 3, 8, 8), 'mask': torch.randint(0, 2, (2, 1, 8, 8))} for _ in range(3)]
    sam, before, losses = train_model(trainloader, args, epochs=2)

    assert all(not p.requires_grad for p in sam.parameters()), "everything was frozen"
    unchanged = all(torch.equal(before[n], p) for n, p in sam.named_parameters())
    assert unchanged, "no parameter moved despite 6 optimizer steps"
    print("evidence holds: 6 steps ran without error yet every parameter is unchanged; losses", [round(l, 3) for l in losses[:3]])
