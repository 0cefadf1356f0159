# source: https://github.com/KaiyangZhou/CoOp/issues/7
# category: DL201
# expect: clean
# evidence: the class-name token embeddings are computed once under torch.no_grad() and stored as buffers, but the learnable context vectors ctx sit outside that block, so ctx receives a gradient and changes every step while the frozen CLIP weights get none.
from types import SimpleNamespace
import torch
import torch.nn as nn
from torch.nn import functional as F

SOT, EOT, CONTEXT_LENGTH = 1, 63, 12
_vocab = {}


class _Tokenizer:
    def encode(self, text):
        return [_vocab.setdefault(w, 2 + len(_vocab)) for w in text.replace(".", " .").split()]


_tokenizer = _Tokenizer()


class clip:
    @staticmethod
    def tokenize(text):
        ids = [SOT] + _tokenizer.encode(text) + [EOT]
        return torch.tensor(ids + [0] * (CONTEXT_LENGTH - len(ids))).unsqueeze(0)


class CLIP(nn.Module):
    """tiny stand-in for the pretrained CLIP model returned by load_clip_to_cpu"""
    def __init__(self, width=16, embed_dim=8):
        super().__init__()
        self.dtype = torch.float32
        self.visual = nn.Sequential(nn.Conv2d(3, width, 4, 4), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, embed_dim))
        self.token_embedding = nn.Embedding(64, width)
        self.positional_embedding = nn.Parameter(torch.randn(CONTEXT_LENGTH, width) * 0.01)
        self.transformer = nn.TransformerEncoder(nn.TransformerEncoderLayer(width, 2, 32, 0.0), 1, enable_nested_tensor=False)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.randn(width, embed_dim) * width ** -0.5)
        self.logit_scale = nn.Parameter(torch.ones([]) * 2.6592)


def load_clip_to_cpu(cfg):
    return CLIP()


class TextEncoder(nn.Module):
    def __init__(self, clip_model):
        super().__init__()
        self.transformer = clip_model.transformer
        self.positional_embedding = clip_model.positional_embedding
        self.ln_final = clip_model.ln_final
        self.text_projection = clip_model.text_projection
        self.dtype = clip_model.dtype

    def forward(self, prompts, tokenized_prompts):
        x = prompts + self.positional_embedding.type(self.dtype)
        x = x.permute(1, 0, 2)  # NLD -> LND
        x = self.transformer(x)
        x = x.permute(1, 0, 2)  # LND -> NLD
        x = self.ln_final(x).type(self.dtype)
        x = x[torch.arange(x.shape[0]), tokenized_prompts.argmax(dim=-1)] @ self.text_projection
        return x


class PromptLearner(nn.Module):
    def __init__(self, cfg, classnames, clip_model):
        super().__init__()
        n_cls = len(classnames)
        n_ctx = cfg.TRAINER.COOP.N_CTX
        dtype = clip_model.dtype
        ctx_dim = clip_model.ln_final.weight.shape[0]
        if cfg.TRAINER.COOP.CSC:
            ctx_vectors = torch.empty(n_cls, n_ctx, ctx_dim, dtype=dtype)
        else:
            ctx_vectors = torch.empty(n_ctx, ctx_dim, dtype=dtype)
        nn.init.normal_(ctx_vectors, std=0.02)
        prompt_prefix = " ".join(["X"] * n_ctx)
        self.ctx = nn.Parameter(ctx_vectors)  # to be optimized

        classnames = [name.replace("_", " ") for name in classnames]
        name_lens = [len(_tokenizer.encode(name)) for name in classnames]
        prompts = [prompt_prefix + " " + name + "." for name in classnames]
        tokenized_prompts = torch.cat([clip.tokenize(p) for p in prompts])
        with torch.no_grad():
            embedding = clip_model.token_embedding(tokenized_prompts).type(dtype)
        self.register_buffer("token_prefix", embedding[:, :1, :])  # SOS
        self.register_buffer("token_suffix", embedding[:, 1 + n_ctx:, :])  # CLS, EOS
        self.n_cls = n_cls
        self.n_ctx = n_ctx
        self.tokenized_prompts = tokenized_prompts
        self.name_lens = name_lens
        self.class_token_position = cfg.TRAINER.COOP.CLASS_TOKEN_POSITION

    def forward(self):
        ctx = self.ctx
        if ctx.dim() == 2:
            ctx = ctx.unsqueeze(0).expand(self.n_cls, -1, -1)
        prefix = self.token_prefix
        suffix = self.token_suffix
        if self.class_token_position == "end":
            prompts = torch.cat([prefix, ctx, suffix], dim=1)
        else:
            raise ValueError
        return prompts


class CustomCLIP(nn.Module):
    def __init__(self, cfg, classnames, clip_model):
        super().__init__()
        self.prompt_learner = PromptLearner(cfg, classnames, clip_model)
        self.tokenized_prompts = self.prompt_learner.tokenized_prompts
        self.image_encoder = clip_model.visual
        self.text_encoder = TextEncoder(clip_model)
        self.logit_scale = clip_model.logit_scale
        self.dtype = clip_model.dtype

    def forward(self, image):
        image_features = self.image_encoder(image.type(self.dtype))
        prompts = self.prompt_learner()
        tokenized_prompts = self.tokenized_prompts
        text_features = self.text_encoder(prompts, tokenized_prompts)
        image_features = image_features / image_features.norm(dim=-1, keepdim=True)
        text_features = text_features / text_features.norm(dim=-1, keepdim=True)
        logit_scale = self.logit_scale.exp()
        logits = logit_scale * image_features @ text_features.t()
        return logits


class CoOp:
    def __init__(self, cfg, classnames):
        self.cfg = cfg
        self.classnames = classnames
        self.build_model()

    def build_model(self):
        cfg = self.cfg
        clip_model = load_clip_to_cpu(cfg)
        self.model = CustomCLIP(cfg, self.classnames, clip_model)
        for name, param in self.model.named_parameters():
            if "prompt_learner" not in name:
                param.requires_grad_(False)
        self.optim = torch.optim.SGD(self.model.prompt_learner.parameters(), lr=cfg.OPTIM.LR, momentum=0.9)

    def model_backward_and_update(self, loss):
        self.optim.zero_grad()
        loss.backward()
        self.optim.step()

    def forward_backward(self, batch):
        image, label = batch["img"], batch["label"]
        output = self.model(image)
        loss = F.cross_entropy(output, label)
        self.model_backward_and_update(loss)
        return {"loss": loss.item(), "acc": (output.argmax(1) == label).float().mean().item() * 100}


if __name__ == "__main__":
    torch.manual_seed(0)
    cfg = SimpleNamespace(TRAINER=SimpleNamespace(COOP=SimpleNamespace(N_CTX=4, CSC=False, CLASS_TOKEN_POSITION="end")),
                          OPTIM=SimpleNamespace(LR=0.002))
    trainer = CoOp(cfg, ["golden_retriever", "tabby_cat", "sports car"])
    ctx0 = trainer.model.prompt_learner.ctx.detach().clone()
    for batch_idx in range(3):
        batch = {"img": torch.randn(4, 3, 8, 8), "label": torch.randint(0, 3, (4,))}
        loss_summary = trainer.forward_backward(batch)
    ctx = trainer.model.prompt_learner.ctx
    assert ctx.grad is not None and float(ctx.grad.abs().sum()) > 0
    assert all(p.grad is None for n, p in trainer.model.named_parameters() if "prompt_learner" not in n)
    with torch.no_grad():
        assert not torch.equal(ctx, ctx0)
    print("evidence holds: ctx gets a gradient and changes (loss %.3f); frozen CLIP weights get none" % loss_summary["loss"])
