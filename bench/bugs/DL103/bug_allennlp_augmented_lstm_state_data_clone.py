# source: https://github.com/allenai/allennlp/issues/2530
# category: DL103
# expect: flag 82, 83
# evidence: the final state of the shorter sequence has the same value as when it is encoded alone, but its loss sends exactly zero gradient to the LSTM and the embeddings, because `.data.clone()` copied it out of the graph
from typing import Optional, Tuple

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence


class AugmentedLstm(torch.nn.Module):
    """An LSTM with highway connections, run one timestep at a time over a length-sorted batch."""

    def __init__(self, input_size: int, hidden_size: int, go_forward: bool = True,
                 use_highway: bool = True) -> None:
        super(AugmentedLstm, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.go_forward = go_forward
        self.use_highway = use_highway
        if use_highway:
            self.input_linearity = nn.Linear(input_size, 6 * hidden_size, bias=False)
            self.state_linearity = nn.Linear(hidden_size, 5 * hidden_size, bias=True)
        else:
            self.input_linearity = nn.Linear(input_size, 4 * hidden_size, bias=False)
            self.state_linearity = nn.Linear(hidden_size, 4 * hidden_size, bias=True)

    def forward(self, inputs: PackedSequence,
                initial_state: Optional[Tuple[torch.Tensor, torch.Tensor]] = None):
        sequence_tensor, batch_lengths = pad_packed_sequence(inputs, batch_first=True)
        batch_size = sequence_tensor.size()[0]
        total_timesteps = sequence_tensor.size()[1]

        output_accumulator = sequence_tensor.new_zeros(batch_size, total_timesteps, self.hidden_size)
        if initial_state is None:
            full_batch_previous_memory = sequence_tensor.new_zeros(batch_size, self.hidden_size)
            full_batch_previous_state = sequence_tensor.new_zeros(batch_size, self.hidden_size)
        else:
            full_batch_previous_state = initial_state[0].squeeze(0)
            full_batch_previous_memory = initial_state[1].squeeze(0)

        current_length_index = batch_size - 1 if self.go_forward else 0
        for timestep in range(total_timesteps):
            index = timestep if self.go_forward else total_timesteps - timestep - 1

            # the batch is sorted by length: finished sequences drop off the end
            if self.go_forward:
                while batch_lengths[current_length_index] <= index:
                    current_length_index -= 1
            else:
                while (current_length_index < (len(batch_lengths) - 1)
                       and batch_lengths[current_length_index + 1] > index):
                    current_length_index += 1

            previous_memory = full_batch_previous_memory[0: current_length_index + 1].clone()
            previous_state = full_batch_previous_state[0: current_length_index + 1].clone()
            timestep_input = sequence_tensor[0: current_length_index + 1, index]

            projected_input = self.input_linearity(timestep_input)
            projected_state = self.state_linearity(previous_state)
            h = self.hidden_size

            input_gate = torch.sigmoid(projected_input[:, 0 * h:1 * h] +
                                       projected_state[:, 0 * h:1 * h])
            forget_gate = torch.sigmoid(projected_input[:, 1 * h:2 * h] +
                                        projected_state[:, 1 * h:2 * h])
            memory_init = torch.tanh(projected_input[:, 2 * h:3 * h] +
                                     projected_state[:, 2 * h:3 * h])
            output_gate = torch.sigmoid(projected_input[:, 3 * h:4 * h] +
                                        projected_state[:, 3 * h:4 * h])
            memory = input_gate * memory_init + forget_gate * previous_memory
            timestep_output = output_gate * torch.tanh(memory)

            if self.use_highway:
                highway_gate = torch.sigmoid(projected_input[:, 4 * h:5 * h] +
                                             projected_state[:, 4 * h:5 * h])
                highway_input_projection = projected_input[:, 5 * h:6 * h]
                timestep_output = highway_gate * timestep_output + (1 - highway_gate) * highway_input_projection

            # a fresh full-batch tensor, with this timestep's rows written into it
            full_batch_previous_memory = full_batch_previous_memory.data.clone()
            full_batch_previous_state = full_batch_previous_state.data.clone()
            full_batch_previous_memory[0: current_length_index + 1] = memory
            full_batch_previous_state[0: current_length_index + 1] = timestep_output
            output_accumulator[0: current_length_index + 1, index] = timestep_output

        output_accumulator = pack_padded_sequence(output_accumulator, batch_lengths, batch_first=True)
        # (num_layers * num_directions, batch_size, hidden_size), like torch.nn.LSTM
        final_state = (full_batch_previous_state.unsqueeze(0),
                       full_batch_previous_memory.unsqueeze(0))
        return output_accumulator, final_state


class LstmClassifier(nn.Module):
    """IMDB-style sentiment classifier on the encoder's final hidden state."""

    def __init__(self, vocab_size=20, embedding_dim=6, hidden_size=5, num_labels=2):
        super(LstmClassifier, self).__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=0)
        self.encoder = AugmentedLstm(embedding_dim, hidden_size)
        self.output_layer = nn.Linear(hidden_size, num_labels)

    def forward(self, tokens, lengths):
        embedded = self.embedding(tokens)
        packed = pack_padded_sequence(embedded, lengths, batch_first=True)
        _, (final_state, _) = self.encoder(packed)
        return self.output_layer(final_state.squeeze(0))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = LstmClassifier()
    tokens = torch.tensor([[3, 7, 2, 9, 4], [5, 1, 8, 0, 0]])  # lengths 5 and 3, sorted
    labels = torch.tensor([1, 0])
    criterion = nn.CrossEntropyLoss(reduction="none")
    params = list(model.encoder.parameters()) + [model.embedding.weight]

    # the review of length 3, encoded in the padded batch (its state stops changing after t=2)
    losses = criterion(model(tokens, [5, 3]), labels)
    grads_in_batch = torch.autograd.grad(losses[1], params, allow_unused=True)

    # the same review encoded on its own: no row ever drops off the batch
    alone_logits = model(tokens[1:, :3], [3])
    loss_alone = criterion(alone_logits, labels[1:])[0]
    grads_alone = torch.autograd.grad(loss_alone, params, allow_unused=True)

    assert torch.allclose(losses[1], loss_alone), (losses[1], loss_alone)
    assert all(g is None or torch.count_nonzero(g) == 0 for g in grads_in_batch)
    assert all(g is not None and torch.count_nonzero(g) > 0 for g in grads_alone)
    print("evidence holds: same loss for the shorter review, but zero gradient to the LSTM and embeddings in the batch")
