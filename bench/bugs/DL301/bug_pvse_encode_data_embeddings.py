# source: https://github.com/yalesong/pvse/issues/30
# category: DL301
# expect: flag 40, 45
# evidence: encode_data() switches to eval mode and encodes every batch with grad enabled; with eval_on_gpu the embeddings are copied into preallocated tensors, which then require grad and chain every batch's graph, so memory grows until the evaluation crashes
import numpy as np
import torch
import torch.nn as nn


class PVSE(nn.Module):
    """Polysemous visual-semantic embedding (tiny version): K embeddings per image and per sentence."""

    def __init__(self, vocab_size=20, embed_size=8, num_embeds=2, mil=True):
        super(PVSE, self).__init__()
        self.mil = mil
        self.num_embeds = num_embeds
        self.img_enc = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                     nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, embed_size * num_embeds))
        self.txt_emb = nn.Embedding(vocab_size, 8)
        self.txt_enc = nn.GRU(8, embed_size * num_embeds, batch_first=True)

    def forward(self, images, sentences, lengths):
        img_emb = self.img_enc(images).view(images.size(0), self.num_embeds, -1)
        out, _ = self.txt_enc(self.txt_emb(sentences))
        txt_emb = out[torch.arange(out.size(0)), lengths - 1].view(sentences.size(0), self.num_embeds, -1)
        img_emb = nn.functional.normalize(img_emb, dim=-1)
        txt_emb = nn.functional.normalize(txt_emb, dim=-1)
        return img_emb, txt_emb, None, None, None, None


def encode_data(model, data_loader, use_gpu=False, device=torch.device("cpu")):
    """Encode all images and sentences loadable by data_loader"""
    # switch to evaluate mode
    model.eval()

    use_mil = model.module.mil if hasattr(model, 'module') else model.mil

    # numpy array to keep all the embeddings
    img_embs, txt_embs = None, None
    for i, data in enumerate(data_loader):
        img, txt, txt_len, ids = data
        img, txt, txt_len = img.to(device), txt.to(device), txt_len.to(device)

        # compute the embeddings
        img_emb, txt_emb, _, _, _, _ = model.forward(img, txt, txt_len)
        del img, txt, txt_len

        # initialize the output embeddings
        if img_embs is None:
            n = sum(len(batch[3]) for batch in data_loader)
            emb_sz = [n, img_emb.size(1), img_emb.size(2)] if use_mil else [n, img_emb.size(1)]
            if use_gpu:
                img_embs = torch.zeros(emb_sz, dtype=img_emb.dtype, requires_grad=False).to(device)
                txt_embs = torch.zeros(emb_sz, dtype=txt_emb.dtype, requires_grad=False).to(device)
            else:
                img_embs = np.zeros(emb_sz)
                txt_embs = np.zeros(emb_sz)

        # preserve the embeddings by copying from gpu and converting to numpy
        img_embs[ids] = img_emb if use_gpu else img_emb.data.cpu().numpy().copy()
        txt_embs[ids] = txt_emb if use_gpu else txt_emb.data.cpu().numpy().copy()

    return img_embs, txt_embs


def graph_nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return len(seen)


def make_loader(n_batches, bsz=2):
    loader = []
    for b in range(n_batches):
        ids = torch.arange(b * bsz, (b + 1) * bsz)
        loader.append((torch.rand(bsz, 3, 8, 8), torch.randint(0, 20, (bsz, 5)), torch.full((bsz,), 5), ids))
    return loader


if __name__ == "__main__":
    torch.manual_seed(0)
    model = PVSE()
    sizes = []
    for n in (2, 4):
        img_embs, txt_embs = encode_data(model, make_loader(n), use_gpu=True)
        assert img_embs.requires_grad and txt_embs.requires_grad
        sizes.append(graph_nodes(img_embs))
    assert sizes[0] < sizes[1], sizes
    print("evidence holds: the embedding store requires grad and chains every batch's graph (%d nodes for 2 batches, %d for 4)"
          % tuple(sizes))
