# source: https://github.com/NVIDIA/tacotron2/issues/133
# category: DL101
# expect: flag 96, 97, 98
# evidence: same losses as a tracked masked_fill, but the postnet's first conv weight gradient differs: ConvBackward reads the mel_outputs that parse_output zeroed through .data after the postnet had used them
import torch
from torch import nn
from torch.nn import functional as F


def get_mask_from_lengths(lengths):
    max_len = int(torch.max(lengths).item())
    ids = torch.arange(0, max_len)
    return ids < lengths.unsqueeze(1)


class Prenet(nn.Module):
    def __init__(self, in_dim, sizes):
        super(Prenet, self).__init__()
        in_sizes = [in_dim] + sizes[:-1]
        self.layers = nn.ModuleList(
            [nn.Linear(i, o, bias=False) for (i, o) in zip(in_sizes, sizes)])

    def forward(self, x):
        for linear in self.layers:
            x = F.dropout(F.relu(linear(x)), p=0.5, training=True)
        return x


class Postnet(nn.Module):
    def __init__(self, n_mel_channels, emb_dim=8, kernel_size=5, n_convolutions=3):
        super(Postnet, self).__init__()
        pad = int((kernel_size - 1) / 2)
        dims = [n_mel_channels] + [emb_dim] * (n_convolutions - 1) + [n_mel_channels]
        self.convolutions = nn.ModuleList(
            [nn.Sequential(nn.Conv1d(dims[i], dims[i + 1], kernel_size, padding=pad),
                           nn.BatchNorm1d(dims[i + 1]))
             for i in range(n_convolutions)])

    def forward(self, x):
        for i in range(len(self.convolutions) - 1):
            x = F.dropout(torch.tanh(self.convolutions[i](x)), 0.5, self.training)
        x = F.dropout(self.convolutions[-1](x), 0.5, self.training)
        return x


class Decoder(nn.Module):
    def __init__(self, n_mel_channels, enc_dim=6, prenet_dim=8, rnn_dim=10):
        super(Decoder, self).__init__()
        self.n_mel_channels = n_mel_channels
        self.prenet = Prenet(n_mel_channels, [prenet_dim, prenet_dim])
        self.decoder_rnn = nn.LSTMCell(prenet_dim + enc_dim, rnn_dim)
        self.query_layer = nn.Linear(rnn_dim, enc_dim, bias=False)
        self.linear_projection = nn.Linear(rnn_dim + enc_dim, n_mel_channels)
        self.gate_layer = nn.Linear(rnn_dim + enc_dim, 1)

    def parse_decoder_outputs(self, mel_outputs, gate_outputs):
        gate_outputs = torch.stack(gate_outputs).transpose(0, 1).contiguous()
        mel_outputs = torch.stack(mel_outputs).transpose(0, 1).contiguous()
        return mel_outputs.transpose(1, 2), gate_outputs  # mels: (B, n_mel_channels, T_out)

    def forward(self, memory, decoder_inputs):
        B = memory.size(0)
        go_frame = memory.new_zeros(1, B, self.n_mel_channels)  # all-zero <GO> frame
        decoder_inputs = decoder_inputs.permute(2, 0, 1)  # (T_out, B, n_mel)
        decoder_inputs = self.prenet(torch.cat((go_frame, decoder_inputs), dim=0))
        h = c = memory.new_zeros(B, self.decoder_rnn.hidden_size)
        context = memory.mean(1)
        mel_outputs, gate_outputs = [], []
        while len(mel_outputs) < decoder_inputs.size(0) - 1:
            x = torch.cat((decoder_inputs[len(mel_outputs)], context), -1)
            h, c = self.decoder_rnn(x, (h, c))
            weights = F.softmax(torch.bmm(memory, self.query_layer(h).unsqueeze(2)).squeeze(2), dim=1)
            context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)
            hc = torch.cat((h, context), dim=1)
            mel_outputs += [self.linear_projection(hc)]
            gate_outputs += [self.gate_layer(hc).squeeze(1)]
        return self.parse_decoder_outputs(mel_outputs, gate_outputs)


class Tacotron2(nn.Module):
    def __init__(self, n_symbols=10, n_mel_channels=4, enc_dim=6, mask_padding=True):
        super(Tacotron2, self).__init__()
        self.mask_padding = mask_padding
        self.n_mel_channels = n_mel_channels
        self.embedding = nn.Embedding(n_symbols, enc_dim)
        self.encoder = nn.Linear(enc_dim, enc_dim)
        self.decoder = Decoder(n_mel_channels, enc_dim)
        self.postnet = Postnet(n_mel_channels)

    def parse_output(self, outputs, output_lengths=None):
        if self.mask_padding and output_lengths is not None:
            mask = ~get_mask_from_lengths(output_lengths)
            mask = mask.expand(self.n_mel_channels, mask.size(0), mask.size(1))
            mask = mask.permute(1, 0, 2)

            outputs[0].data.masked_fill_(mask, 0.0)
            outputs[1].data.masked_fill_(mask, 0.0)
            outputs[2].data.masked_fill_(mask[:, 0, :], 1e3)  # gate energies
        return outputs

    def forward(self, inputs):
        text_inputs, mels, output_lengths = inputs
        encoder_outputs = torch.tanh(self.encoder(self.embedding(text_inputs)))
        mel_outputs, gate_outputs = self.decoder(encoder_outputs, mels)
        mel_outputs_postnet = self.postnet(mel_outputs)
        mel_outputs_postnet = mel_outputs + mel_outputs_postnet
        return self.parse_output([mel_outputs, mel_outputs_postnet, gate_outputs], output_lengths)


class Tacotron2Loss(nn.Module):
    def forward(self, model_output, targets):
        mel_target, gate_target = targets[0], targets[1].view(-1, 1)
        mel_out, mel_out_postnet, gate_out = model_output
        mel_loss = nn.MSELoss()(mel_out, mel_target) + nn.MSELoss()(mel_out_postnet, mel_target)
        gate_loss = nn.BCEWithLogitsLoss()(gate_out.reshape(-1, 1), gate_target)
        return mel_loss + gate_loss


def tracked_parse_output(model, outputs, output_lengths):
    """The same masking written with out-of-place masked_fill that autograd records."""
    mask = ~get_mask_from_lengths(output_lengths)
    mask = mask.expand(model.n_mel_channels, mask.size(0), mask.size(1)).permute(1, 0, 2)
    return [outputs[0].masked_fill(mask, 0.0), outputs[1].masked_fill(mask, 0.0),
            outputs[2].masked_fill(mask[:, 0, :], 1e3)]


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Tacotron2()
    criterion = Tacotron2Loss()
    output_lengths = torch.tensor([9, 5])
    mel_padded = torch.randn(2, 4, 9) * get_mask_from_lengths(output_lengths).unsqueeze(1)
    gate_padded = (torch.arange(9) >= (output_lengths - 1).unsqueeze(1)).float()
    batch = (torch.randint(0, 10, (2, 3)), mel_padded, output_lengths)
    conv1 = model.postnet.convolutions[0][0]
    torch.manual_seed(1)  # same dropout masks in both runs
    model.mask_padding = False
    ref_loss = criterion(tracked_parse_output(model, model(batch), output_lengths), (mel_padded, gate_padded))
    ref_grad = torch.autograd.grad(ref_loss, conv1.weight)[0]
    torch.manual_seed(1)
    model.mask_padding = True
    loss = criterion(model(batch), (mel_padded, gate_padded))
    model.zero_grad()
    loss.backward()
    bug_grad = conv1.weight.grad
    assert torch.allclose(loss.detach(), ref_loss.detach()), (loss.item(), ref_loss.item())
    diff = (bug_grad - ref_grad).abs().max().item()
    assert not torch.allclose(bug_grad, ref_grad, rtol=1e-3, atol=1e-6), diff
    print("evidence holds: loss %.4f in both, but postnet conv1 weight grad differs from the tracked masking (max diff %.3g)"
          % (loss.item(), diff))
