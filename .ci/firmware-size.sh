#!/usr/bin/env bash
# Flash and RAM of a firmware ELF, from its section sizes (`arm-none-eabi-size -A`, Debian's
# binutils-arm-none-eabi):
#
#     .ci/firmware-size.sh FIRMWARE.elf --model MODEL.tflite [--data FILE]... [--stack BYTES]
#
# flash = .vector_table + .text + .rodata + .data (the initial values of .data are stored in
#         flash); of it, the model (the bytes of MODEL, which must appear in the ELF as one
#         object of exactly that size: `arm-none-eabi-nm -S`) and the test data (each FILE,
#         e.g. an input and its expected output), and what remains: the runtime, its kernels,
#         the startup code and the firmware's own few functions.
# RAM   = .data + .bss + .uninit, plus BYTES of stack when given (the firmware measures its
#         stack's high-water mark by painting it).
set -euo pipefail

usage() {
    echo "usage: $0 FIRMWARE.elf --model MODEL.tflite [--data FILE]... [--stack BYTES]" >&2
    exit 2
}
[[ $# -ge 1 ]] || usage
elf=$1
shift
model=""
data=()
stack=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --model) model=${2:?}; shift 2 ;;
        --data) data+=("${2:?}"); shift 2 ;;
        --stack) stack=${2:?}; shift 2 ;;
        *) usage ;;
    esac
done
[[ -n $model ]] || usage

sections=$(arm-none-eabi-size -A -d "$elf")
section() { # NAME: its size, 0 when absent
    awk -v name="$1" '$1 == name { print $2; found = 1 } END { if (!found) print 0 }' <<<"$sections"
}
vectors=$(section .vector_table)
text=$(section .text)
rodata=$(section .rodata)
dat=$(section .data)
bss=$(section .bss)
uninit=$(section .uninit)

model_bytes=$(stat -c %s "$model")
symbols=$(arm-none-eabi-nm -S "$elf")
matches=$(awk -v size="$(printf '%08x' "$model_bytes")" '$2 == size' <<<"$symbols" | wc -l)
if [[ $matches -ne 1 ]]; then
    echo "firmware-size.sh: expected one object of the model's $model_bytes bytes in $elf, found $matches" >&2
    exit 1
fi
data_bytes=0
for file in "${data[@]}"; do
    data_bytes=$((data_bytes + $(stat -c %s "$file")))
done

flash=$((vectors + text + rodata + dat))
runtime=$((flash - model_bytes - data_bytes))
ram=$((dat + bss + uninit))

echo "$sections" | grep -E '^(section|\.vector_table|\.text|\.rodata|\.data|\.bss|\.uninit) '
printf 'flash: %d bytes = .vector_table %d + .text %d + .rodata %d + .data %d\n' \
    "$flash" "$vectors" "$text" "$rodata" "$dat"
printf '  the model: %d bytes (%s)\n' "$model_bytes" "$model"
printf '  test data: %d bytes\n' "$data_bytes"
printf '  runtime, kernels, startup and firmware: %d bytes (%.1f kB)\n' \
    "$runtime" "$(awk -v b="$runtime" 'BEGIN { print b / 1024 }')"
printf 'RAM: %d bytes of statics = .data %d + .bss %d + .uninit %d\n' "$ram" "$dat" "$bss" "$uninit"
if [[ -n $stack ]]; then
    printf 'RAM with the stack: %d bytes (+ %d bytes of stack, its high-water mark)\n' \
        "$((ram + stack))" "$stack"
fi
