# Sourced by the scripts that run strfry beside nostrwire:
#   strfry_conf DIR PORT   a minimal strfry config at DIR.conf: its database
#                          in DIR (created), listening on 127.0.0.1:PORT,
#                          `nofiles = 0` (no rlimit change; this host's
#                          limit is enough for loopback tests)
strfry_conf() {
    mkdir -p "$1"
    cat > "$1.conf" <<CONF
db = "$1/"
dbParams {
    maxreaders = 256
    mapsize = 10995116277760
}
relay {
    bind = "127.0.0.1"
    port = $2
    nofiles = 0
}
CONF
}
