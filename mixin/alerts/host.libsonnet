// Alerts for PCP hosts: pmieconf's rules (PCP 6.0.3) in PromQL, each naming
// its pmie rule (label pmie_rule) and how its meaning differs (annotation
// pmie_difference). pmie evaluates a rule on two samples one "delta" apart
// (2-4 min); here rates are over rateInterval and a condition must hold for
// hostFor, which makes every alert slower and steadier than its pmie rule.
local lib = import '../lib.libsonnet';
{
  local c = $._config,
  local alert(name, rule, expr, summary, description, difference, severity='warning') = {
    alert: name,
    expr: lib.withHostname(expr, c.hostSelector),
    'for': c.hostFor,
    labels: { severity: severity, pmie_rule: rule },
    annotations: {
      summary: summary,
      description: description,
      pmie_difference: difference,
    },
  },
  prometheusAlerts+:: {
    groups+: [{
      name: 'pcp-host',
      rules: [
        alert(
          'PCPFilesystemFilling',
          'filesys.filling',
          |||
            100 * filesys_used_bytes{%(hostSelector)s} / (filesys_capacity_bytes{%(hostSelector)s} > 0) > %(filesysFullPercent)s
            and
            predict_linear(filesys_used_bytes{%(hostSelector)s}[%(filesysGrowthWindow)s], %(filesysLeadTimeSeconds)s) > filesys_capacity_bytes{%(hostSelector)s}
          ||| % c,
          'File system is filling up',
          'File system {{ $labels.instname }} of {{ $labels.hostname }} is {{ $value | humanize }}%% full and at its growth of the last %(filesysGrowthWindow)s will be full within %(filesysLeadTimeSeconds)s s.' % c,
          'pmie projects the growth between two samples 4 min apart; this is a linear fit over %(filesysGrowthWindow)s, steadier against bursts. The alert value is the percentage used.' % c,
        ),
        alert(
          'PCPSwapLow',
          'memory.swap_low',
          '100 * instance:pcp_swap_free:ratio{%(hostSelector)s} < %(swapLowPercent)s' % c,
          'Low free swap space',
          'Only {{ $value | humanize }}% of the swap space of {{ $labels.hostname }} is free: it may soon run out of virtual memory.',
          'Same condition; hosts without swap (swap.length 0) are left out, where pmie divides by zero.',
        ),
        alert(
          'PCPMemoryExhausted',
          'memory.exhausted',
          |||
            avg_over_time((rate(swap_pagesout_total{%(hostSelector)s}[1m]) >= bool %(swapPagesOutPerSecond)s)[10m:1m]) >= %(swapPagesOutFraction)s
            and
            avg_over_time(rate(swap_pagesout_total{%(hostSelector)s}[1m])[10m:1m]) > 0
          ||| % c,
          'Severe demand for real memory',
          '{{ $labels.hostname }} swapped out at least %(swapPagesOutPerSecond)s pages per second during {{ $value | humanizePercentage }} of the last 10 minutes.' % c,
          'pmie counts the last 10 samples of its delta; this counts the last 10 one-minute rates.',
        ),
        alert(
          'PCPOOMKill',
          'memory.oom_kill',
          'increase(mem_vmstat_oom_kill_total{%(hostSelector)s}[%(rateInterval)s]) > 0' % c,
          'OOM kill',
          'The kernel out-of-memory killer killed {{ $value | humanize }} processes on {{ $labels.hostname }} in the last %(rateInterval)s.' % c,
          'Same condition over %(rateInterval)s instead of one sample interval; fires at once (no "for").' % c,
          'critical',
        ) + { 'for': '0m' },
        alert(
          'PCPHighCPUUtilisation',
          'cpu.util',
          '100 * instance:pcp_cpu_utilisation:rate%(rateInterval)s{%(hostSelector)s} > %(cpuUtilPercent)s' % c,
          'High average processor utilization',
          'The CPUs of {{ $labels.hostname }} were {{ $value | humanize }}% busy (user, sys and intr) on average.',
          'Same quantity (kernel.all.cpu.user + sys + intr over hinv.ncpu), averaged over %(rateInterval)s and held for %(hostFor)s.' % c,
        ),
        alert(
          'PCPHighLoadAverage',
          'cpu.load_average',
          |||
            kernel_all_load{%(hostSelector)s, instname="1 minute"} > ignoring (instname) (hinv_ncpu{%(hostSelector)s} * %(loadPerCPU)s)
            and ignoring (instname)
            kernel_all_load{%(hostSelector)s, instname="1 minute"} > %(loadMin)s
          ||| % c,
          'High 1-minute load average',
          'The 1-minute load average of {{ $labels.hostname }} is {{ $value | humanize }}, above %(loadPerCPU)s per CPU and %(loadMin)s.' % c,
          'Same condition, held for %(hostFor)s.' % c,
        ),
        alert(
          'PCPDiskSaturated',
          'per_disk.average_queue_length',
          |||
            100 * instance_instname:pcp_disk_utilisation:rate%(rateInterval)s{%(hostSelector)s} > %(diskBusyPercent)s
            and
            instance_instname:pcp_disk_queue_length:rate%(rateInterval)s{%(hostSelector)s} > instance_instname:pcp_disk_queue_length:rate%(rateInterval)s{%(hostSelector)s} offset %(rateInterval)s
          ||| % c,
          'High per disk average queue length',
          'Disk {{ $labels.instname }} of {{ $labels.hostname }} was busy {{ $value | humanize }}% of the time and its queue is growing.',
          'pmie compares the queue length of the last two samples; this compares the last %(rateInterval)s with the %(rateInterval)s before.' % c,
        ),
        alert(
          'PCPNetworkInterfaceErrors',
          'per_netif.errors',
          'instance_instname:pcp_network_errors:rate%(rateInterval)s{%(hostSelector)s} > %(netErrorsPerSecond)s' % c,
          'High network interface error rate',
          'Interface {{ $labels.instname }} of {{ $labels.hostname }} has {{ $value | humanize }} errors per second.',
          'Same condition (network.interface.total.errors per second), averaged over %(rateInterval)s; no interface list (select with hostSelector or instname).' % c,
        ),
        alert(
          'PCPNetworkInterfaceSaturated',
          'per_netif.util',
          '100 * instance_instname:pcp_network_utilisation:rate%(rateInterval)s{%(hostSelector)s} > %(netUtilPercent)s' % c,
          'High network interface utilization',
          'Interface {{ $labels.instname }} of {{ $labels.hostname }} transfers {{ $value | humanize }}% of its bandwidth (in and out).',
          'Same quantity (network.interface.total.bytes over network.interface.baudrate), averaged over %(rateInterval)s; interfaces without a baud rate are left out.' % c,
        ),
        alert(
          'PCPTCPQueueFullDrops',
          'network.tcpqfulldrops',
          'rate(network_tcp_reqqfulldrop_total{%(hostSelector)s}[%(rateInterval)s]) > 0' % c,
          'TCP request queue full drops',
          '{{ $labels.hostname }} drops {{ $value | humanize }} new connections per second because a SYN backlog queue is full.',
          'Same condition over %(rateInterval)s.' % c,
        ),
        alert(
          'PCPTCPListenOverflows',
          'network.tcplistenoverflows',
          'rate(network_tcp_listenoverflows_total{%(hostSelector)s}[%(rateInterval)s]) > 0' % c,
          'TCP listen queue overflows',
          '{{ $labels.hostname }} overflows {{ $value | humanize }} listen queues per second: a service does not accept connections fast enough.',
          'Same condition over %(rateInterval)s.' % c,
        ),
        alert(
          'PCPLowEntropy',
          'entropy.available',
          'kernel_all_entropy_avail{%(hostSelector)s} <= %(entropyLow)s' % c,
          'Low random number entropy available',
          'Only {{ $value }} bits of entropy are available on {{ $labels.hostname }}.',
          'Same condition.',
        ),
      ],
    }],
  },
}
