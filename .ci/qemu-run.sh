#!/usr/bin/env bash
# Cargo runner for the bare-metal firmware (see .cargo/config.toml):
#
#     .ci/qemu-run.sh [--machine mps2-an386|mps3-an547] path/to/firmware.elf
#
# Boots the ELF on a QEMU board with semihosting: mps2-an386 (Cortex-M4F, the default: the
# thumbv7em-none-eabihf firmware) or mps3-an547 (Cortex-M55: the thumbv8m.main-none-eabihf
# one). It pipes the defmt frames the firmware writes to semihosting stdout into `defmt-print`
# (a firmware built without defmt, whose ELF has no `.defmt` section, prints plain text: it is
# shown as it is), and exits with QEMU's status:
# 0 when the firmware called `debug::exit(EXIT_SUCCESS)`, 1 for EXIT_FAILURE, 124 when it did not
# exit within QEMU_TIMEOUT seconds (default 120). The decoder's status is only reported.
set -euo pipefail

usage="usage: $0 [--machine mps2-an386|mps3-an547] FIRMWARE.elf"
machine=mps2-an386
if [[ ${1:-} == --machine ]]; then
    [[ $# -ge 2 ]] || { echo "$usage" >&2; exit 2; }
    machine=$2
    shift 2
fi
# Each board takes exactly one CPU model.
case $machine in
    mps2-an386) cpu=cortex-m4 ;;
    mps3-an547) cpu=cortex-m55 ;;
    *) echo "qemu-run.sh: unknown machine '$machine'; $usage" >&2; exit 2 ;;
esac
if [[ $# -lt 1 ]]; then
    echo "$usage" >&2
    exit 2
fi
elf=$1
shift
if [[ $# -gt 0 ]]; then
    echo "qemu-run.sh: ignoring program arguments: $*" >&2
fi
timeout_s=${QEMU_TIMEOUT:-120}

# The section table says whether the firmware logs with defmt (GNU readelf reads Arm ELFs).
plain=false
for readelf in arm-none-eabi-readelf readelf; do
    if command -v "$readelf" >/dev/null; then
        sections=$("$readelf" -S "$elf")
        grep -q ' \.defmt ' <<<"$sections" || plain=true
        break
    fi
done

decoder=$(command -v defmt-print || true)
if ! $plain && [[ -z $decoder ]]; then
    decoder=${CARGO_HOME:-$HOME/.cargo}/bin/defmt-print
    [[ -x $decoder ]] || { echo "qemu-run.sh: defmt-print not found (cargo install --locked defmt-print)" >&2; exit 2; }
fi
command -v qemu-system-arm >/dev/null || { echo "qemu-run.sh: qemu-system-arm not found" >&2; exit 2; }

echo "qemu-run.sh: $elf on $machine (timeout ${timeout_s}s)" >&2
set +e
# -k: SIGKILL if QEMU ignores the SIGTERM. stdin from /dev/null: -nographic would otherwise put
# an interactive terminal in raw mode and multiplex the QEMU monitor on it.
#
# -icount shift=0: the virtual clock advances exactly 1 ns per guest instruction, so timers
# (SysTick) count executed instructions deterministically; QEMU emulates no DWT cycle counter.
# The firmware's instruction counts rely on it (and fail without it).
timeout -k 5 "$timeout_s" \
    qemu-system-arm -cpu "$cpu" -machine "$machine" -nographic -icount shift=0 \
    -semihosting-config enable=on,target=native -kernel "$elf" </dev/null \
    | if $plain; then cat; else "$decoder" -e "$elf" stdin; fi
statuses=("${PIPESTATUS[@]}")
set -e
qemu_status=${statuses[0]}
decoder_status=${statuses[1]}

if [[ $decoder_status -ne 0 ]]; then
    echo "qemu-run.sh: warning: defmt-print exited with $decoder_status" >&2
fi
case $qemu_status in
    0) echo "qemu-run.sh: firmware exited with success" >&2 ;;
    124 | 137) echo "qemu-run.sh: TIMEOUT: firmware did not exit within ${timeout_s}s" >&2 ;;
    *) echo "qemu-run.sh: firmware FAILED (QEMU exit status $qemu_status)" >&2 ;;
esac
exit "$qemu_status"
