# source: https://github.com/coqui-ai/TTS/issues/2348
# category: DL201
# expect: flag 34
# evidence: the generator's gradients are identical whether the speaker consistency loss is weighted 0 or 9: the term reaches no generator parameter
import torch
from torch import nn
import torch.nn.functional as F


class TorchSpec(nn.Module):
    def __init__(self, n_fft=64, hop_length=16, n_mels=12):
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("mel_basis", torch.rand(n_mels, n_fft // 2 + 1))

    def forward(self, x):
        spec = torch.stft(x, self.n_fft, hop_length=self.hop_length, window=self.window, return_complex=True)
        return torch.matmul(self.mel_basis, spec.abs().pow(2))


class ResNetSpeakerEncoder(nn.Module):
    def __init__(self, input_dim=12, proj_dim=16, use_torch_spec=True, log_input=True):
        super().__init__()
        self.use_torch_spec = use_torch_spec
        self.log_input = log_input
        self.torch_spec = TorchSpec(n_mels=input_dim)
        self.instancenorm = nn.InstanceNorm1d(input_dim)
        self.conv1 = nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * input_dim, proj_dim)

    def forward(self, x, l2_norm=False):
        with torch.no_grad():
            x = x.squeeze(1)
            if self.use_torch_spec:
                x = self.torch_spec(x)
            if self.log_input:
                x = (x + 1e-6).log()
            x = self.instancenorm(x).unsqueeze(1)

        x = F.relu(self.bn1(self.conv1(x)))
        x = x.mean(dim=-1).flatten(1)
        x = self.fc(x)
        if l2_norm:
            x = F.normalize(x, p=2, dim=1)
        return x


class WaveformDecoder(nn.Module):
    def __init__(self, hidden=8, upsample=64):
        super().__init__()
        self.pre = nn.Conv1d(4, hidden, 3, padding=1)
        self.up = nn.ConvTranspose1d(hidden, hidden, upsample, stride=upsample)
        self.post = nn.Conv1d(hidden, 1, 3, padding=1)

    def forward(self, z):
        return torch.tanh(self.post(F.leaky_relu(self.up(self.pre(z)), 0.1)))


def generator_loss(waveform_decoder, speaker_encoder, z, wav, c_spk_loss):
    wav_hat = waveform_decoder(z)
    loss_wav = F.l1_loss(wav_hat, wav)
    gt_spk_emb = speaker_encoder(wav, l2_norm=True)
    syn_spk_emb = speaker_encoder(wav_hat, l2_norm=True)
    loss_spk = -F.cosine_similarity(gt_spk_emb, syn_spk_emb).mean()
    return loss_wav + c_spk_loss * loss_spk, loss_spk


def train_step(waveform_decoder, speaker_encoder, optimizer, z, wav, c_spk_loss=9.0):
    loss, loss_spk = generator_loss(waveform_decoder, speaker_encoder, z, wav, c_spk_loss)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item(), loss_spk.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    speaker_encoder = ResNetSpeakerEncoder().eval()
    speaker_encoder.requires_grad_(False)
    waveform_decoder = WaveformDecoder()
    optimizer = torch.optim.AdamW(waveform_decoder.parameters(), lr=2e-4)
    z = torch.randn(2, 4, 8)
    wav = torch.rand(2, 1, 512) * 2 - 1
    params = list(waveform_decoder.parameters())
    loss_on, loss_spk = generator_loss(waveform_decoder, speaker_encoder, z, wav, c_spk_loss=9.0)
    loss_off, _ = generator_loss(waveform_decoder, speaker_encoder, z, wav, c_spk_loss=0.0)
    g_on = torch.autograd.grad(loss_on, params)
    g_off = torch.autograd.grad(loss_off, params)
    assert loss_spk.item() != 0.0
    assert all(torch.equal(a, b) for a, b in zip(g_on, g_off))
    train_step(waveform_decoder, speaker_encoder, optimizer, z, wav)
    print("evidence holds: weighting the speaker consistency loss 9 or 0 gives the generator the same gradients")
