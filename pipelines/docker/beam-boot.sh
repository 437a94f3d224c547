#!/bin/sh
# The stand-in for Beam's SDK worker boot in an image built without Beam's SDK image (the
# BEAM_SDK_IMAGE build argument named a base that has none, as `make image` does where Docker
# Hub cannot be reached). A given command runs as usual (`docker run IMAGE python3 ...`); a
# remote Beam runner's worker start (flags only) is refused, saying why.
case "${1:-}" in
    ""|-*)
        echo "estflow image: built without Beam's SDK worker boot (BEAM_SDK_IMAGE had none), so it cannot be a remote Beam runner's worker; rebuild with the default BEAM_SDK_IMAGE (make image IMAGE_BASE=hub)." >&2
        exit 2
        ;;
esac
exec "$@"
