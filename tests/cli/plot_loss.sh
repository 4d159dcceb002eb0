#!/usr/bin/env bash
# training.plot_loss draws what LLaMA-Factory's plot_loss draws (cli/train/loss_plot.h): 640 × 480 PNGs of the
# training loss and the evaluation loss, lettered — a title above the axes, numbers under the x axis and left of the
# y axis, the axis labels, the legend — which png_text.py counts as dark pixels in each band of the image.
# Usage: plot_loss.sh MEGATRAIN_BINARY SOURCE_DIR
set -uo pipefail
bin=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$src" || exit 1
status=0
"$bin" train --config configs/demo.yaml --set dataset.max_seq_len=32 --set training.batch_size=4 \
  --set training.num_steps=8 --set training.logging_steps=1 --set training.plot_loss=true --set dataset.val_size=0.1 \
  --set training.eval_steps=4 --set "training.output_dir=$work/run" >"$work/out" 2>"$work/err" ||
  { echo "FAIL train"; tail -5 "$work/err"; exit 1; }
for plot in training_loss training_eval_loss; do
  # Bands: the title, the x tick numbers, the x label, the y tick numbers, the y label, the legend's text.
  counts=$(python3 tests/cli/png_text.py "$work/run/$plot.png" title:100:4:540:30 x_numbers:72:433:620:450 \
           x_label:300:452:380:475 y_numbers:20:36:66:428 y_label:2:150:30:330 legend:546:44:612:92) ||
    { echo "FAIL $plot: unreadable PNG"; status=1; continue; }
  read -r width height <<<"$(head -1 <<<"$counts")"
  [[ $width -eq 640 && $height -eq 480 ]] || { echo "FAIL $plot: ${width}x$height, not 640x480"; status=1; }
  while read -r band dark; do
    ((dark >= 20)) || { echo "FAIL $plot: no text in the $band band ($dark dark pixels)"; status=1; }
  done < <(tail -n +2 <<<"$counts")
  [[ $status -eq 0 ]] && echo "ok   $plot.png: 640x480, lettered: $(tail -n +2 <<<"$counts" | tr '\n' ' ')"
done
exit $status
