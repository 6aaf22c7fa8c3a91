// Selectors and thresholds of the mixin. Override them when importing it:
//   (import 'mixin.libsonnet') + { _config+:: { exporterSelector: 'job="pcp"' } }
{
  _config+:: {
    // the scrape job(s) of pcp-exporter (examples/prometheus/prometheus.yml: job "pcp-exporter")
    exporterSelector: 'job="pcp-exporter"',
    // PCP hosts' series: the same job by default
    hostSelector: self.exporterSelector,
    // the scrape job of the node_exporter whose textfile collector reads
    // `pcp-exporter backfill --metrics.textfile` files (Debian's job "node")
    backfillSelector: 'job="node"',
    // how long a health condition lasts before its alert fires
    healthFor: '5m',
    // how long a host condition lasts before its alert fires
    hostFor: '5m',
    // the window of rate() and increase() in rules and alerts
    rateInterval: '5m',
    // a followed archive this far behind the wall clock (seconds) is lagging
    archiveLagSeconds: 300,

    // pmieconf defaults (PCP 6.0.3, /var/lib/pcp/config/pmieconf), one per rule
    filesysFullPercent: 95,  // filesys.filling threshold
    filesysLeadTimeSeconds: 1200,  // filesys.filling lead_time (20 min)
    filesysGrowthWindow: '1h',  // window of the growth rate (pmie: its delta, 4 min, between two samples)
    swapLowPercent: 10,  // memory.swap_low threshold
    swapPagesOutPerSecond: 5,  // memory.exhausted threshold
    swapPagesOutFraction: 0.3,  // memory.exhausted pct (30 %) of the last 10 samples
    cpuUtilPercent: 90,  // cpu.util threshold
    loadPerCPU: 3,  // cpu.load_average per_cpu_load
    loadMin: 4,  // cpu.load_average min_load
    diskBusyPercent: 95,  // per_disk.average_queue_length threshold
    netErrorsPerSecond: 15,  // per_netif.errors threshold
    netUtilPercent: 85,  // per_netif.util threshold
    entropyLow: 150,  // entropy.available threshold

    // dashboards
    grafanaVersion: '11.6',  // the dashboards follow this version's JSON schema
    grafanaSchemaVersion: 41,
    dashboardTags: ['pcp', 'pcp-exporter'],
    dashboardRefresh: '30s',
  },
}
