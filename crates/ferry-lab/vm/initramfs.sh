# initramfs.sh: the guest's root filesystem, sourced by ipvs-vm (which sets STAGE, BUILD, KV,
# ARCH_LIB, GUEST_PKGS, MODULES, log and die).
#
# The base archive (tools, libraries, modules, /init) is cached and rebuilt only when its inputs
# change; each run appends a small archive holding the command to run and the shares to mount.

LDSO_REL=$ARCH_LIB/ld-linux-x86-64.so.2

# A path inside the stage, following symlinks inside the stage (Debian's are often absolute,
# e.g. /lib64/ld-linux-x86-64.so.2, and must not resolve to the host's files).
stage_real() {
  local p=$1 n=0 t
  while [ -L "$STAGE$p" ] && [ $n -lt 20 ]; do
    t=$(readlink "$STAGE$p")
    case $t in /*) p=$t ;; *) p=$(dirname "$p")/$t ;; esac
    n=$((n + 1))
  done
  echo "$STAGE$p"
}

# Copies the shared libraries of $2 (resolved by the stage's own ld.so, never the host's) into
# the tree $1.
copy_libs() {
  local root=$1 bin=$2 line lib rel
  local ldso=$STAGE/$LDSO_REL libpath=$STAGE/$ARCH_LIB:$STAGE/usr/$ARCH_LIB
  "$ldso" --library-path "$libpath" --list "$bin" >/dev/null 2>&1 || return 0 # static
  while read -r line; do
    case $line in
      *'=> not found'*) die "missing library for $bin: $line" ;;
      *'=> '/*) lib=${line#*=> }; lib=${lib%% (*} ;;
      *) continue ;;
    esac
    rel=${lib#"$STAGE"}
    [ -e "$root$rel" ] || { mkdir -p "$root$(dirname "$rel")"; cp -L "$lib" "$root$rel"; }
  done < <("$ldso" --library-path "$libpath" --list "$bin")
}

# Copies the first of the candidate stage paths that exists to DEST in the tree, with its
# libraries.
copy_tool() {
  local root=$1 dest=$2 src; shift 2
  for c in "$@"; do
    src=$(stage_real "$c")
    if [ -f "$src" ]; then
      mkdir -p "$root$(dirname "$dest")"
      cp "$src" "$root$dest"
      copy_libs "$root" "$src"
      return 0
    fi
  done
  die "none of $* in the stage"
}

copy_modules() {
  local root=$1 md=$STAGE/lib/modules/$KV line f list=$BUILD/modules.list
  : > "$list"
  for m in $MODULES; do
    line=$(grep -E "/${m}\.ko(\.[a-z]+)?:" "$md/modules.dep" || true)
    if [ -z "$line" ]; then
      grep -qE "/${m}\.ko" "$md/modules.builtin" || log "warning: module $m not in $KV"
      continue
    fi
    echo "$line" | tr -d ':' | tr ' ' '\n' | grep . >> "$list"
    echo "$m" >> "$root/etc/modules-load"
  done
  sort -u "$list" -o "$list"
  mkdir -p "$root/lib/modules/$KV"
  while read -r f; do
    mkdir -p "$root/lib/modules/$KV/$(dirname "$f")"
    cp "$md/$f" "$root/lib/modules/$KV/$f"
    grep -E "^${f}:" "$md/modules.dep" >> "$root/lib/modules/$KV/modules.dep"
  done < "$list"
  cp "$md/modules.builtin" "$md/modules.order" "$root/lib/modules/$KV/" 2>/dev/null || true
}

write_init() {
  cat > "$1/init" <<'EOF'
#!/bin/busybox sh
# PID 1 of the ipvs-vm guest: mount the basics, load the modules, mount the shares, run the
# command, report its exit status on the console, power off.
/bin/busybox --install -s /bin
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm /run /tmp
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
echo "ipvs-vm: kernel up at $(cut -d" " -f1 /proc/uptime)s"
hostname ipvs-vm
ip link set lo up
for m in $(cat /etc/modules-load); do modprobe "$m" 2>/dev/null || echo "ipvs-vm: modprobe $m failed"; done
rc=0
while read -r tag path; do
  mkdir -p "$path"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,access=any,cache=loose "$tag" "$path" \
    || { echo "ipvs-vm: cannot mount $tag at $path"; rc=125; }
done < /ferry-vm/shares
echo "FERRY-VM-BOOTED uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(uname -r)"
if [ "$rc" = 0 ]; then
  dash /ferry-vm/run; rc=$?
fi
sync
while read -r tag path; do umount "$path" 2>/dev/null; done < /ferry-vm/shares
echo "FERRY-VM-RESULT rc=$rc uptime=$(cut -d' ' -f1 /proc/uptime)"
poweroff -f
EOF
  chmod +x "$1/init"
}

# /etc/protocols for iptables, ipset and nft (netbase is not in the closure).
write_etc() {
  local root=$1
  printf 'root:x:0:0:root:/root:/bin/sh\n' > "$root/etc/passwd"
  printf 'root:x:0:\n' > "$root/etc/group"
  printf '127.0.0.1 localhost\n::1 localhost\n' > "$root/etc/hosts"
  if [ -f "$STAGE/etc/protocols" ]; then
    cp "$STAGE/etc/protocols" "$root/etc/"
  else
    printf 'ip 0 IP\nicmp 1 ICMP\ntcp 6 TCP\nudp 17 UDP\nipv6-icmp 58 IPv6-ICMP\nsctp 132 SCTP\n' > "$root/etc/protocols"
  fi
  [ -f "$STAGE/etc/services" ] && cp "$STAGE/etc/services" "$root/etc/"
  cp -a "$STAGE/etc/iproute2" "$root/etc/" 2>/dev/null || true
}

build_base_initramfs() {
  local key root=$BUILD/base
  key=$( { cat "$STAGE/.complete"; echo "$MODULES"; cat "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-16)
  BASE_INITRD=$BUILD/base-$key.cpio.gz
  [ -s "$BASE_INITRD" ] && return 0
  log "building the guest's initramfs"
  rm -rf "$root" "$BUILD"/base-*.cpio.gz
  mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,$ARCH_LIB,usr/$ARCH_LIB,lib64,etc,proc,sys,dev,run,tmp,root,var,ferry-vm}
  ln -s /run "$root/var/run"
  cp "$STAGE/bin/busybox" "$root/bin/busybox"
  # Debian's busybox-static prefers its own applets even over PATH (its `ip` has no netns),
  # so /bin/sh is dash and busybox is only PID 1's shell.
  cp "$(stage_real /bin/dash)" "$root/bin/dash"
  ln -s dash "$root/bin/sh"
  # The kernel runs /sbin/modprobe for request_module().
  ln -s /bin/busybox "$root/sbin/modprobe"
  cp "$STAGE/$LDSO_REL" "$root/$ARCH_LIB/"
  ln -s "/$LDSO_REL" "$root/lib64/ld-linux-x86-64.so.2"
  # What a dynamically linked Rust program (a cargo test binary on a share) needs.
  for l in libc.so.6 libm.so.6 libgcc_s.so.1 libpthread.so.0 libdl.so.2 librt.so.1; do
    cp -L "$(stage_real "/$ARCH_LIB/$l")" "$root/$ARCH_LIB/$l"
  done
  copy_tool "$root" /usr/sbin/ip /bin/ip /sbin/ip /usr/bin/ip /usr/sbin/ip
  copy_tool "$root" /usr/sbin/ipvsadm /sbin/ipvsadm /usr/sbin/ipvsadm
  copy_tool "$root" /usr/sbin/ipset /sbin/ipset /usr/sbin/ipset
  copy_tool "$root" /usr/sbin/nft /usr/sbin/nft /sbin/nft
  copy_tool "$root" /usr/sbin/conntrack /usr/sbin/conntrack /sbin/conntrack
  copy_tool "$root" /usr/bin/curl /usr/bin/curl
  copy_tool "$root" /usr/sbin/xtables-nft-multi /usr/sbin/xtables-nft-multi /sbin/xtables-nft-multi
  copy_tool "$root" /usr/sbin/xtables-legacy-multi /usr/sbin/xtables-legacy-multi /sbin/xtables-legacy-multi
  local t
  for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -s xtables-nft-multi "$root/usr/sbin/$t"
    ln -s xtables-nft-multi "$root/usr/sbin/${t/tables/tables-nft}"
    ln -s xtables-legacy-multi "$root/usr/sbin/${t/tables/tables-legacy}"
  done
  # iptables' matches and targets are dlopen()ed: ld.so cannot see them, so all are copied.
  cp -a "$STAGE/usr/$ARCH_LIB/xtables" "$root/usr/$ARCH_LIB/"
  for so in "$root/usr/$ARCH_LIB"/xtables/*.so; do copy_libs "$root" "$so"; done
  write_etc "$root"
  : > "$root/etc/modules-load"
  copy_modules "$root"
  write_init "$root"
  (cd "$root" && find . | "$STAGE/bin/busybox" cpio -o -H newc -R 0:0 2>/dev/null | gzip -1) > "$BASE_INITRD.tmp"
  mv "$BASE_INITRD.tmp" "$BASE_INITRD"
  log "initramfs $(du -h "$BASE_INITRD" | cut -f1), $(grep -c . "$BUILD/modules.list") modules"
}

# A word for dash, single-quoted.
shell_quote() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }

# The run archive in $1/initrd.cpio.gz: the base archive followed by /ferry-vm/{run,shares}.
write_run_archive() {
  local dir=$1 tree=$1/tree; shift
  mkdir -p "$tree/ferry-vm"
  : > "$tree/ferry-vm/shares"
  local i=0 s e
  for s in "${SHARES[@]}"; do
    printf 'share%d %s\n' "$i" "$s" >> "$tree/ferry-vm/shares"
    i=$((i + 1))
  done
  {
    echo "#!/bin/sh"
    for e in "${ENVS[@]}"; do printf 'export %s=%s\n' "${e%%=*}" "$(shell_quote "${e#*=}")"; done
    printf 'cd %s || exit 125\n' "$(shell_quote "${CWD:-${SHARES[0]:-/}}")"
    printf 'exec'
    for a in "$@"; do printf ' %s' "$(shell_quote "$a")"; done
    echo
  } > "$tree/ferry-vm/run"
  (cd "$tree" && find . | "$STAGE/bin/busybox" cpio -o -H newc -R 0:0 2>/dev/null | gzip -1) > "$dir/run.cpio.gz"
  cat "$BASE_INITRD" "$dir/run.cpio.gz" > "$dir/initrd.cpio.gz"
}
