#!/bin/sh
# Build the faulty ALSA test PCM plug-in.
# Usage: build.sh OUTDIR  ->  OUTDIR/libasound_module_pcm_faulty.so
set -eu
if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
cd "$here"
exec ${CC:-cc} -O2 -g -Wall -Wextra -Werror -shared -fPIC \
	-o "$out/libasound_module_pcm_faulty.so" pcm_faulty.c -lasound
