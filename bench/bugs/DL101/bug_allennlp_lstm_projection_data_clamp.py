# source: https://github.com/allenai/allennlp/pull/862
# category: DL101
# expect: flag 83, 88
# evidence: the outputs equal those of the same cell clipped with torch.clamp, but every parameter gradient differs: the in-place .data clamps are invisible to autograd, so clipped memory cells and projected states still pass gradient
from typing import List, Optional

import torch


def block_orthogonal(tensor, split_sizes):
    """Orthogonal init, one block at a time."""
    rows, cols = split_sizes
    for r in range(0, tensor.size(0), rows):
        for c in range(0, tensor.size(1), cols):
            block = torch.empty(rows, cols)
            torch.nn.init.orthogonal_(block)
            tensor[r:r + rows, c:c + cols] = block


class LstmCellWithProjection(torch.nn.Module):
    """An LSTM with a projected, clipped hidden state and a clipped memory cell."""

    def __init__(self, input_size: int, hidden_size: int, cell_size: int,
                 go_forward: bool = True,
                 memory_cell_clip_value: Optional[float] = None,
                 state_projection_clip_value: Optional[float] = None) -> None:
        super(LstmCellWithProjection, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.cell_size = cell_size
        self.go_forward = go_forward
        self.state_projection_clip_value = state_projection_clip_value
        self.memory_cell_clip_value = memory_cell_clip_value

        # We do the projections for all the gates all at once.
        self.input_linearity = torch.nn.Linear(input_size, 4 * cell_size, bias=False)
        self.state_linearity = torch.nn.Linear(hidden_size, 4 * cell_size, bias=True)
        # Additional projection matrix for making the hidden state smaller.
        self.state_projection = torch.nn.Linear(cell_size, hidden_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self):
        block_orthogonal(self.input_linearity.weight.data, [self.cell_size, self.input_size])
        block_orthogonal(self.state_linearity.weight.data, [self.cell_size, self.hidden_size])
        self.state_linearity.bias.data.fill_(0.0)
        # Initialize forget gate biases to 1.0 (Jozefowicz, 2015).
        self.state_linearity.bias.data[self.cell_size:2 * self.cell_size].fill_(1.0)

    def forward(self, inputs: torch.Tensor, batch_lengths: List[int]):
        batch_size, total_timesteps = inputs.size()[0], inputs.size()[1]
        output_accumulator = inputs.new_zeros(batch_size, total_timesteps, self.hidden_size)
        full_batch_previous_memory = inputs.new_zeros(batch_size, self.cell_size)
        full_batch_previous_state = inputs.new_zeros(batch_size, self.hidden_size)

        current_length_index = batch_size - 1 if self.go_forward else 0
        for timestep in range(total_timesteps):
            index = timestep if self.go_forward else total_timesteps - timestep - 1
            # Batch is sorted by length, longest first: drop the sequences that ended.
            if self.go_forward:
                while batch_lengths[current_length_index] <= index:
                    current_length_index -= 1
            else:
                while current_length_index < (len(batch_lengths) - 1) and \
                        batch_lengths[current_length_index + 1] > index:
                    current_length_index += 1

            previous_memory = full_batch_previous_memory[0: current_length_index + 1].clone()
            previous_state = full_batch_previous_state[0: current_length_index + 1].clone()
            timestep_input = inputs[0: current_length_index + 1, index]

            projected_input = self.input_linearity(timestep_input)
            projected_state = self.state_linearity(previous_state)
            c = self.cell_size
            input_gate = torch.sigmoid(projected_input[:, 0 * c:1 * c] + projected_state[:, 0 * c:1 * c])
            forget_gate = torch.sigmoid(projected_input[:, 1 * c:2 * c] + projected_state[:, 1 * c:2 * c])
            memory_init = torch.tanh(projected_input[:, 2 * c:3 * c] + projected_state[:, 2 * c:3 * c])
            output_gate = torch.sigmoid(projected_input[:, 3 * c:4 * c] + projected_state[:, 3 * c:4 * c])
            memory = input_gate * memory_init + forget_gate * previous_memory

            # The non-standard part of this cell: clip the memory cell, then project
            # the output of the timestep to a smaller size and clip it again.
            if self.memory_cell_clip_value:
                memory.data.clamp_(-self.memory_cell_clip_value, self.memory_cell_clip_value)

            pre_projection_timestep_output = output_gate * torch.tanh(memory)
            timestep_output = self.state_projection(pre_projection_timestep_output)
            if self.state_projection_clip_value:
                timestep_output.data.clamp_(-self.state_projection_clip_value, self.state_projection_clip_value)

            full_batch_previous_memory = full_batch_previous_memory.clone()
            full_batch_previous_state = full_batch_previous_state.clone()
            full_batch_previous_memory[0:current_length_index + 1] = memory
            full_batch_previous_state[0:current_length_index + 1] = timestep_output
            output_accumulator[0:current_length_index + 1, index] = timestep_output

        final_state = (full_batch_previous_state.unsqueeze(0), full_batch_previous_memory.unsqueeze(0))
        return output_accumulator, final_state


def tracked_reference(cell, inputs, batch_lengths):
    """The same forward (go_forward=True) with the clips written as recorded torch.clamp."""
    batch_size, total_timesteps = inputs.shape[0], inputs.shape[1]
    c = cell.cell_size
    memory_all = inputs.new_zeros(batch_size, c)
    state_all = inputs.new_zeros(batch_size, cell.hidden_size)
    outputs = []
    for t in range(total_timesteps):
        n = sum(1 for length in batch_lengths if length > t)
        pre = cell.input_linearity(inputs[:n, t]) + cell.state_linearity(state_all[:n])
        i, f, g, o = pre[:, :c].sigmoid(), pre[:, c:2 * c].sigmoid(), pre[:, 2 * c:3 * c].tanh(), pre[:, 3 * c:].sigmoid()
        memory = torch.clamp(i * g + f * memory_all[:n], -cell.memory_cell_clip_value, cell.memory_cell_clip_value)
        out = torch.clamp(cell.state_projection(o * torch.tanh(memory)),
                          -cell.state_projection_clip_value, cell.state_projection_clip_value)
        memory_all = torch.cat([memory, memory_all[n:]], 0)
        state_all = torch.cat([out, state_all[n:]], 0)
        outputs.append(torch.cat([out, out.new_zeros(batch_size - n, cell.hidden_size)], 0))
    return torch.stack(outputs, 1)


if __name__ == "__main__":
    torch.manual_seed(0)
    cell = LstmCellWithProjection(input_size=3, hidden_size=2, cell_size=4,
                                  memory_cell_clip_value=0.5, state_projection_clip_value=0.2)
    inputs = torch.randn(3, 5, 3) * 3.0
    batch_lengths = [5, 4, 2]
    target = torch.randn(3, 5, 2)

    ref_out = tracked_reference(cell, inputs, batch_lengths)
    ref_grads = torch.autograd.grad(((ref_out - target) ** 2).sum(), list(cell.parameters()))

    output, _ = cell(inputs, batch_lengths)
    loss = ((output - target) ** 2).sum()
    cell.zero_grad()
    loss.backward()
    bug_grads = [p.grad for p in cell.parameters()]

    assert ref_out.abs().max() <= 0.2 + 1e-6 and torch.allclose(output, ref_out, atol=1e-6), "same forward"
    assert bool((output.abs() > 0.2 - 1e-6).any()), "the state clip must bite for the case to mean anything"
    names = [n for n, _ in cell.named_parameters()]
    differ = [n for n, b, r in zip(names, bug_grads, ref_grads) if not torch.allclose(b, r, rtol=1e-4, atol=1e-6)]
    assert differ == names, differ
    diff = max((b - r).abs().max().item() for b, r in zip(bug_grads, ref_grads))
    print("evidence holds: identical outputs, but the gradients of %s differ from the tracked clamp (max diff %.3g)"
          % (", ".join(differ), diff))
