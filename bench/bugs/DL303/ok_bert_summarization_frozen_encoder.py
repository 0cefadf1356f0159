# source: https://github.com/nayeon7lee/bert-summarization/blob/master/model/transformer.py
# category: DL303
# expect: clean
# evidence: only the frozen BERT encoder runs under torch.no_grad(); the decoder, generator and embeddings run with grad, so train_one_batch's backward/step changes the decoder and generator weights.
import torch
import torch.nn as nn
import torch.nn.functional as F


class config:
    PAD_idx = 0
    SOS_idx = 2
    max_dec_step = 4
    hidden_dim = 16
    emb_dim = 16
    vocab_size = 30
    lr = 1e-2
    noam = False
    USE_CUDA = False


class BertEmbeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.emb_dim)

    def forward(self, input_ids):
        return self.word_embeddings(input_ids)


class BertModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = BertEmbeddings()
        self.encoder = nn.TransformerEncoderLayer(config.emb_dim, 2, 32, dropout=0.0, batch_first=True)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, output_all_encoded_layers=False):
        h = self.encoder(self.embeddings(input_ids))
        return h, None


class Decoder(nn.Module):
    def __init__(self, embedding_size, hidden_size):
        super().__init__()
        self.embedding_proj = nn.Linear(embedding_size, hidden_size, bias=False)
        self.attn = nn.MultiheadAttention(hidden_size, 2, batch_first=True)
        self.layer_norm = nn.LayerNorm(hidden_size)

    def forward(self, inputs, encoder_output, mask):
        x = self.embedding_proj(inputs)
        encoder_output = self.embedding_proj(encoder_output)
        y, attn_dist = self.attn(x, encoder_output, encoder_output)
        return self.layer_norm(x + y), attn_dist


class Generator(nn.Module):
    def __init__(self, d_model, vocab):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab)

    def forward(self, x, attn_dist=None, enc_batch_extend_vocab=None, extra_zeros=None, copy_gate=None, copy_ptr=None, mask_trg=None):
        logit = self.proj(x)
        return F.log_softmax(logit, dim=-1)


class Summarizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = BertModel()
        self.encoder.eval()  # always in eval mode
        self.embedding = self.encoder.embeddings
        self.decoder = Decoder(config.emb_dim, config.hidden_dim)
        self.generator = Generator(config.hidden_dim, config.vocab_size)
        self.criterion = nn.NLLLoss(ignore_index=config.PAD_idx)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=config.lr)

    def train_one_batch(self, batch, train=True):
        input_ids_batch, input_mask_batch, example_index_batch, dec_batch, dec_mask_batch, dec_index_batch = batch
        enc_batch_extend_vocab, extra_zeros, copy_gate, copy_ptr = None, None, None, None

        self.optimizer.zero_grad()

        with torch.no_grad():
            # encoder_outputs are hidden states from transformer
            encoder_outputs, _ = self.encoder(input_ids_batch, token_type_ids=example_index_batch, attention_mask=input_mask_batch, output_all_encoded_layers=False)

        # # Draft Decoder
        sos_token = torch.LongTensor([config.SOS_idx] * input_ids_batch.size(0)).unsqueeze(1)
        dec_batch_shift = torch.cat((sos_token, dec_batch[:, :-1]), 1)  # shift the decoder input (summary) by one step
        mask_trg = dec_batch_shift.eq(config.PAD_idx).unsqueeze(1)
        pre_logit1, attn_dist1 = self.decoder(self.embedding(dec_batch_shift), encoder_outputs, (None, mask_trg))

        logit1 = self.generator(pre_logit1, attn_dist1, enc_batch_extend_vocab, extra_zeros, copy_gate=copy_gate, copy_ptr=copy_ptr, mask_trg=mask_trg)
        loss1 = self.criterion(logit1.contiguous().view(-1, logit1.size(-1)), dec_batch.contiguous().view(-1))

        # Refine Decoder - train using gold label TARGET
        pre_logit2, attn_dist2 = self.generate_refinement_output(encoder_outputs, dec_batch, dec_index_batch, extra_zeros, dec_mask_batch)

        logit2 = self.generator(pre_logit2, attn_dist2, enc_batch_extend_vocab, extra_zeros, copy_gate=copy_gate, copy_ptr=copy_ptr, mask_trg=None)
        loss2 = self.criterion(logit2.contiguous().view(-1, logit2.size(-1)), dec_batch.contiguous().view(-1))

        loss = loss1 + loss2

        if train:
            loss.backward()
            self.optimizer.step()
        return loss

    def generate_refinement_output(self, encoder_outputs, input_ids_batch, example_index_batch, extra_zeros, input_mask_batch):
        logits, attns = [], []

        for i in range(config.max_dec_step):
            with torch.no_grad():
                # Additionally mask the location of i.
                context_input_mask_batch = []
                for mask in input_mask_batch:
                    mask[i] = 0
                    context_input_mask_batch.append(mask)

                context_input_mask_batch = torch.stack(context_input_mask_batch)
                context_vector, _ = self.encoder(input_ids_batch, token_type_ids=example_index_batch, attention_mask=context_input_mask_batch, output_all_encoded_layers=False)

            # decoder input size == encoder output size == (batch_size, 512, 768)
            out, attn_dist = self.decoder(context_vector, encoder_outputs, (None, None))

            logits.append(out[:, i:i + 1, :])
            attns.append(attn_dist[:, i:i + 1, :])

        logits = torch.cat(logits, dim=1)
        attns = torch.cat(attns, dim=1)
        return logits, attns


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Summarizer()
    B, L = 2, config.max_dec_step
    batch = (
        torch.randint(3, config.vocab_size, (B, 6)),
        torch.ones(B, 6, dtype=torch.long),
        torch.zeros(B, 6, dtype=torch.long),
        torch.randint(3, config.vocab_size, (B, L)),
        torch.ones(B, L, dtype=torch.long),
        torch.zeros(B, L, dtype=torch.long),
    )
    dec_before = model.decoder.embedding_proj.weight.detach().clone()
    gen_before = model.generator.proj.weight.detach().clone()

    losses = [model.train_one_batch(batch).item() for _ in range(3)]

    assert model.decoder.embedding_proj.weight.grad is not None
    assert not torch.equal(dec_before, model.decoder.embedding_proj.weight.detach())
    assert not torch.equal(gen_before, model.generator.proj.weight.detach())
    print("evidence holds: with the BERT encoder under no_grad, decoder and generator still get gradients and change; losses", [round(l, 3) for l in losses])
