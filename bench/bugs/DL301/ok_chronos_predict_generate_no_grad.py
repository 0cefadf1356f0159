# source: https://github.com/amazon-science/chronos-forecasting/pull/184
# category: DL301
# expect: clean
# evidence: ChronosPipeline.predict has no no_grad of its own, but every forward goes through model.generate, which is decorated with @torch.no_grad(), so the collected predictions carry no graph.
import torch
import torch.nn as nn


class MeanScaleUniformBins:
    def __init__(self, n_tokens=32, low=-5.0, high=5.0):
        self.centers = torch.linspace(low, high, n_tokens)

    def context_input_transform(self, context):
        scale = context.abs().mean(dim=-1, keepdim=True).clamp(min=1e-5)
        token_ids = torch.bucketize(context / scale, self.centers).clamp(max=len(self.centers) - 1)
        return token_ids, torch.ones_like(token_ids, dtype=torch.bool), scale

    def output_transform(self, samples, scale):
        return self.centers[samples] * scale.unsqueeze(-1)


class T5ForConditionalGeneration(nn.Module):
    def __init__(self, n_tokens=32, d_model=16):
        super().__init__()
        self.shared = nn.Embedding(n_tokens, d_model)
        self.lm_head = nn.Linear(d_model, n_tokens)

    @torch.no_grad()
    def generate(self, input_ids, attention_mask, max_new_tokens, num_return_sequences, temperature=1.0):
        h = self.shared(input_ids).mean(dim=1)
        logits = self.lm_head(h) / temperature
        probs = torch.softmax(logits, dim=-1)
        samples = torch.multinomial(probs, num_return_sequences * max_new_tokens, replacement=True)
        return samples.view(input_ids.shape[0] * num_return_sequences, max_new_tokens)


class ChronosModel(nn.Module):
    def __init__(self, model, prediction_length=4):
        super().__init__()
        self.model = model
        self.prediction_length = prediction_length

    def forward(self, input_ids, attention_mask, prediction_length=None, num_samples=3, temperature=1.0):
        if prediction_length is None:
            prediction_length = self.prediction_length
        preds = self.model.generate(input_ids=input_ids, attention_mask=attention_mask,
                                    max_new_tokens=prediction_length,
                                    num_return_sequences=num_samples, temperature=temperature)
        return preds.reshape(input_ids.size(0), num_samples, -1)


class ChronosPipeline:
    def __init__(self, tokenizer, model):
        self.tokenizer = tokenizer
        self.model = model

    def predict(self, context, prediction_length=None, num_samples=3):
        context_tensor = context
        predictions = []
        remaining = prediction_length
        while remaining > 0:
            token_ids, attention_mask, scale = self.tokenizer.context_input_transform(context_tensor)
            samples = self.model(token_ids, attention_mask, min(remaining, self.model.prediction_length), num_samples)
            prediction = self.tokenizer.output_transform(samples, scale)
            predictions.append(prediction)
            remaining -= prediction.shape[-1]
            if remaining <= 0:
                break
            context_tensor = torch.cat([context_tensor, prediction.median(dim=1).values], dim=-1)
        return torch.cat(predictions, dim=-1).to(dtype=torch.float32, device="cpu")


if __name__ == "__main__":
    torch.manual_seed(0)
    pipeline = ChronosPipeline(MeanScaleUniformBins(), ChronosModel(T5ForConditionalGeneration()))
    graphs = []
    pipeline.model.model.lm_head.register_forward_hook(lambda m, i, o: graphs.append(o.requires_grad))
    forecast = pipeline.predict(torch.randn(2, 10), prediction_length=10, num_samples=3)

    assert forecast.shape == (2, 3, 10)
    assert graphs and not any(graphs), "generate() ran under no_grad every time"
    assert forecast.grad_fn is None and not forecast.requires_grad
    print("evidence holds:", len(graphs), "forwards in predict() built no graph; forecast shape", tuple(forecast.shape))
