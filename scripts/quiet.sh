# Sourced by the measuring scripts in this folder: wait_for_quiet waits (up to two minutes)
# for the 1-minute load average to fall under 0.5, so that a build or an earlier run has
# settled before anything is timed; it says so when the machine did not quiet down.
wait_for_quiet() {
  local i
  for ((i = 0; i < 24; i++)); do
    awk '{exit !($1 < 0.5)}' /proc/loadavg && return 0
    sleep 5
  done
  echo "# the load average stayed at or above 0.5 for two minutes: $(cat /proc/loadavg)" >&2
}
