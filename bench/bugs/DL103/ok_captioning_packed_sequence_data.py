# source: https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning/blob/master/train.py
# category: DL103
# expect: clean
# evidence: .data here is the PackedSequence field, not Tensor.data: the packed scores keep their grad_fn, the loss reaches every decoder and encoder parameter and training changes them
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence


class Encoder(nn.Module):
    def __init__(self, encoded_image_size=2, dim=8):
        super(Encoder, self).__init__()
        self.conv = nn.Conv2d(3, dim, 3, padding=1)
        self.adaptive_pool = nn.AdaptiveAvgPool2d((encoded_image_size, encoded_image_size))

    def forward(self, images):
        out = self.adaptive_pool(torch.relu(self.conv(images)))
        return out.permute(0, 2, 3, 1)


class DecoderWithAttention(nn.Module):
    def __init__(self, embed_dim=8, decoder_dim=8, vocab_size=12, encoder_dim=8):
        super(DecoderWithAttention, self).__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, embed_dim)
        self.attention = nn.Linear(encoder_dim + decoder_dim, 1)
        self.decode_step = nn.LSTMCell(embed_dim + encoder_dim, decoder_dim, bias=True)
        self.init_h = nn.Linear(encoder_dim, decoder_dim)
        self.init_c = nn.Linear(encoder_dim, decoder_dim)
        self.fc = nn.Linear(decoder_dim, vocab_size)

    def forward(self, encoder_out, encoded_captions, caption_lengths):
        batch_size = encoder_out.size(0)
        encoder_out = encoder_out.view(batch_size, -1, encoder_out.size(-1))
        caption_lengths, sort_ind = caption_lengths.squeeze(1).sort(dim=0, descending=True)
        encoder_out = encoder_out[sort_ind]
        encoded_captions = encoded_captions[sort_ind]
        embeddings = self.embedding(encoded_captions)
        mean_encoder_out = encoder_out.mean(dim=1)
        h, c = self.init_h(mean_encoder_out), self.init_c(mean_encoder_out)
        decode_lengths = (caption_lengths - 1).tolist()
        predictions = torch.zeros(batch_size, max(decode_lengths), self.vocab_size)
        alphas = torch.zeros(batch_size, max(decode_lengths), encoder_out.size(1))
        for t in range(max(decode_lengths)):
            batch_size_t = sum([l > t for l in decode_lengths])
            att_in = torch.cat([encoder_out[:batch_size_t], h[:batch_size_t].unsqueeze(1).expand(-1, encoder_out.size(1), -1)], 2)
            alpha = torch.softmax(self.attention(att_in).squeeze(2), dim=1)
            awe = (encoder_out[:batch_size_t] * alpha.unsqueeze(2)).sum(dim=1)
            h, c = self.decode_step(torch.cat([embeddings[:batch_size_t, t, :], awe], dim=1),
                                    (h[:batch_size_t], c[:batch_size_t]))
            predictions[:batch_size_t, t, :] = self.fc(h)
            alphas[:batch_size_t, t, :] = alpha
        return predictions, encoded_captions, decode_lengths, alphas, sort_ind


def train(train_loader, encoder, decoder, criterion, encoder_optimizer, decoder_optimizer, alpha_c=1.0):
    decoder.train()
    encoder.train()
    for i, (imgs, caps, caplens) in enumerate(train_loader):
        imgs = encoder(imgs)
        scores, caps_sorted, decode_lengths, alphas, sort_ind = decoder(imgs, caps, caplens)

        # Since we decoded starting with <start>, the targets are all words after <start>, up to <end>
        targets = caps_sorted[:, 1:]

        # Remove timesteps that we didn't decode at, or are pads
        # pack_padded_sequence is an easy trick to do this
        scores = pack_padded_sequence(scores, decode_lengths, batch_first=True).data
        targets = pack_padded_sequence(targets, decode_lengths, batch_first=True).data

        loss = criterion(scores, targets)
        loss += alpha_c * ((1. - alphas.sum(dim=1)) ** 2).mean()

        decoder_optimizer.zero_grad()
        encoder_optimizer.zero_grad()
        loss.backward()
        decoder_optimizer.step()
        encoder_optimizer.step()
    return scores


if __name__ == "__main__":
    torch.manual_seed(0)
    encoder, decoder = Encoder(), DecoderWithAttention()
    encoder_optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-3)
    decoder_optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-3)
    imgs = torch.rand(3, 3, 8, 8)
    caps = torch.randint(1, 12, (3, 6))
    caplens = torch.tensor([[6], [4], [5]])
    enc_before = [p.detach().clone() for p in encoder.parameters()]
    dec_before = [p.detach().clone() for p in decoder.parameters()]
    scores = train([(imgs, caps, caplens)], encoder, decoder, nn.CrossEntropyLoss(), encoder_optimizer, decoder_optimizer)
    assert scores.grad_fn is not None and scores.shape == (5 + 3 + 4, 12)
    assert all(p.grad is not None for p in decoder.parameters())
    assert all(not torch.equal(b, p) for b, p in zip(enc_before, encoder.parameters()))
    assert all(not torch.equal(b, p) for b, p in zip(dec_before, decoder.parameters()))
    print("evidence holds: the PackedSequence .data keeps the graph; encoder and decoder both train")
