# Polls a relay's /metrics and the CPU ticks of the relay and the load
# tester. Usage: python3 poll2.py PORT OUT_FILE INTERVAL_S RELAY_PID
import sys, time, urllib.request, subprocess, os
port=sys.argv[1]; out=open(sys.argv[2],'w'); iv=float(sys.argv[3]); rpid=sys.argv[4]
def cpu(pid):
    try:
        f=open(f'/proc/{pid}/stat').read().rsplit(')',1)[1].split()
        return (int(f[11])+int(f[12]))  # utime+stime ticks (after state at index 0)
    except Exception: return -1
lpid=None; t0=time.time()
while True:
    if lpid is None:
        r=subprocess.run(['pgrep','-f','load --relay ws://127.0.0.1:'+port],capture_output=True,text=True).stdout.split()
        lpid=r[0] if r else None
    try:
        txt=urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics',timeout=5).read().decode()
    except Exception:
        if time.time()-t0>20: break
        time.sleep(0.1); continue
    s='-'
    for line in txt.splitlines():
        if line.startswith('nostrwire_events_stored_total '): s=line.split()[1]
    out.write(f"{time.time()-t0:.3f} {s} relay {cpu(rpid)} load {cpu(lpid) if lpid else -1}\n"); out.flush()
    time.sleep(iv)
