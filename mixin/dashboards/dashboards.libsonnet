// The dashboards: pcp-exporter's health, a PCP host overview and an MMV
// application overview, each with a data-source variable and job/instance
// selectors.
local d = import 'lib.libsonnet';
{
  local c = $._config,
  local sel = 'job="$job", instance="$instance"',
  local ri = '$__rate_interval',
  local jobVar(metric) = d.queryVariable('job', 'job', metric, 'Job'),
  local instVar(metric) = d.queryVariable('instance', 'instance', '%s{job="$job"}' % metric, 'Instance'),

  grafanaDashboards+:: {
    'pcp-exporter-health.json': d.dashboard(
      'pcp-exporter-health',
      'pcp-exporter / Health',
      "pcp-exporter's own health: its sources, reads, reloads and resources (Grafana %s)." % c.grafanaVersion,
      [d.datasourceVariable, jobVar('pcp_exporter_build_info'), instVar('pcp_exporter_build_info')],
      [
        d.timeseries('Scrape up', 'up: 1 when Prometheus scraped the exporter.', [['up{%s}' % sel, '{{instance}}']], 'none', 0, 0),
        d.timeseries('Sources up', 'pcp_exporter_source_up: 0 with the reason (down, missing, stalled, ended, error).', [['pcp_exporter_source_up{%s}' % sel, '{{source}} {{reason}}']], 'none', 12, 0),
        d.timeseries('Source read time', 'Time the last read of each source took.', [['pcp_exporter_source_fetch_duration_seconds{%s}' % sel, '{{source}}']], 's', 0, 8),
        d.timeseries('Followed archive lag', 'How far the values served from a followed archive are behind real time.', [['pcp_exporter_source_lag_seconds{%s}' % sel, '{{source}}']], 's', 12, 8),
        d.timeseries('Read errors', 'Failed reads of each source per second, and metric values pmcd answered with an error.', [
          ['rate(pcp_exporter_source_errors_total{%s}[%s])' % [sel, ri], 'read errors {{source}}'],
          ['rate(pcp_exporter_pmcd_metric_errors_total{%s}[%s])' % [sel, ri], 'pmcd metric errors {{source}}'],
        ], 'ops', 0, 16),
        d.timeseries('Exported families', 'PCP metrics exported as families, and MMV files seen.', [
          ['pcp_exporter_metrics_exported{%s}' % sel, 'families {{source}}'],
          ['pcp_exporter_mmv_files{%s}' % sel, 'MMV files exported={{exported}}'],
        ], 'none', 12, 16),
        d.timeseries('Configuration reload', 'Whether the last reload of the mapping and derived-metrics files succeeded.', [['pcp_exporter_config_last_reload_successful{%s}' % sel, 'reload successful']], 'none', 0, 24),
        d.timeseries('Scrape duration', 'How long Prometheus took to scrape the exporter, and the samples it got.', [['scrape_duration_seconds{%s}' % sel, 'duration']], 's', 12, 24),
        d.timeseries('CPU', 'CPU time the exporter used per second.', [['rate(process_cpu_seconds_total{%s}[%s])' % [sel, ri], 'cpu']], 'percentunit', 0, 32),
        d.timeseries('Memory', 'Resident memory and Go heap of the exporter.', [
          ['process_resident_memory_bytes{%s}' % sel, 'resident'],
          ['go_memstats_heap_inuse_bytes{%s}' % sel, 'heap in use'],
        ], 'bytes', 12, 32),
        d.table('Build', 'Version of the exporter.', 'pcp_exporter_build_info{%s}' % sel, 0, 40, 24, 4),
      ],
      c,
    ),

    'pcp-host-overview.json': d.dashboard(
      'pcp-host-overview',
      'PCP / Host overview',
      "A PCP host's CPU, load, memory, disks, network and file systems on pcp-exporter's default names (Grafana %s)." % c.grafanaVersion,
      [d.datasourceVariable, jobVar('hinv_ncpu'), instVar('hinv_ncpu')],
      [
        d.table('Host', "The host's PCP context labels (target_info).", 'target_info{%s}' % sel, 0, 0, 24, 4),
        d.timeseries('CPU utilisation', 'kernel.all.cpu user, sys and intr over hinv.ncpu (the quantity of pmie rule cpu.util).', [
          ['rate(kernel_all_cpu_user_seconds_total{%s}[%s]) / hinv_ncpu{%s}' % [sel, ri, sel], 'user'],
          ['rate(kernel_all_cpu_sys_seconds_total{%s}[%s]) / hinv_ncpu{%s}' % [sel, ri, sel], 'sys'],
          ['rate(kernel_all_cpu_intr_seconds_total{%s}[%s]) / hinv_ncpu{%s}' % [sel, ri, sel], 'intr'],
        ], 'percentunit', 0, 4),
        d.timeseries('Load average', 'kernel.all.load and the number of CPUs.', [
          ['kernel_all_load{%s}' % sel, '{{instname}}'],
          ['hinv_ncpu{%s}' % sel, 'CPUs'],
        ], 'none', 12, 4),
        d.timeseries('Memory', 'mem.physmem, mem.util.available, used and free.', [
          ['mem_physmem_bytes{%s}' % sel, 'physical'],
          ['mem_util_available_bytes{%s}' % sel, 'available'],
          ['mem_util_used_bytes{%s}' % sel, 'used'],
          ['mem_util_free_bytes{%s}' % sel, 'free'],
        ], 'bytes', 0, 12),
        d.timeseries('Swap', 'swap.length and swap.free, and pages swapped out per second.', [
          ['swap_length_bytes{%s}' % sel, 'size'],
          ['swap_free_bytes{%s}' % sel, 'free'],
          ['rate(swap_pagesout_total{%s}[%s])' % [sel, ri], 'pages out/s'],
        ], 'bytes', 12, 12),
        d.timeseries('Disk utilisation', 'disk.dev.avactive: the fraction of time each disk was busy.', [['rate(disk_dev_avactive_seconds_total{%s}[%s])' % [sel, ri], '{{instname}}']], 'percentunit', 0, 20),
        d.timeseries('Disk throughput', 'disk.dev.read_bytes and write_bytes per second.', [
          ['rate(disk_dev_read_bytes_total{%s}[%s])' % [sel, ri], 'read {{instname}}'],
          ['rate(disk_dev_write_bytes_total{%s}[%s])' % [sel, ri], 'write {{instname}}'],
        ], 'Bps', 12, 20),
        d.timeseries('Network throughput', 'network.interface.in.bytes and out.bytes per second.', [
          ['rate(network_interface_in_bytes_total{%s}[%s])' % [sel, ri], 'in {{instname}}'],
          ['rate(network_interface_out_bytes_total{%s}[%s])' % [sel, ri], 'out {{instname}}'],
        ], 'Bps', 0, 28),
        d.timeseries('Network errors and TCP retransmits', 'network.interface.total.errors per second, and the fraction of TCP segments retransmitted.', [
          ['rate(network_interface_total_errors_total{%s}[%s])' % [sel, ri], 'errors {{instname}}'],
          ['rate(network_tcp_retranssegs_total{%s}[%s]) / rate(network_tcp_outsegs_total{%s}[%s])' % [sel, ri, sel, ri], 'TCP retransmitted'],
        ], 'short', 12, 28),
        d.timeseries('File systems used', 'filesys.used over filesys.capacity.', [['filesys_used_bytes{%s} / filesys_capacity_bytes{%s}' % [sel, sel], '{{instname}}']], 'percentunit', 0, 36),
        d.timeseries('OOM kills', 'mem.vmstat.oom_kill: processes the kernel killed for want of memory.', [['increase(mem_vmstat_oom_kill_total{%s}[%s])' % [sel, ri], 'OOM kills']], 'none', 12, 36),
      ],
      c,
    ),

    'pcp-mmv-application.json': d.dashboard(
      'pcp-mmv-application',
      'PCP / MMV application',
      "An MMV application's metrics (mmv.<app>.*): its families, the rates of its counters, its gauges and strings (Grafana %s)." % c.grafanaVersion,
      [
        d.datasourceVariable,
        jobVar('pcp_exporter_mmv_files'),
        instVar('pcp_exporter_mmv_files'),
        d.queryVariable('app', '__name__', '{__name__=~"mmv_.+", job="$job", instance="$instance"}', 'Application', '/^mmv_([^_]+)_.*/'),
        d.queryVariable('counter', '__name__', '{__name__=~"mmv_${app}_.+_total", job="$job", instance="$instance"}', 'Counters') + { multi: true, includeAll: true },
      ],
      [
        d.table('Families', 'The metric families of the application, with their series counts.', 'count by (__name__) ({__name__=~"mmv_${app}_.+", %s})' % sel, 0, 0, 12, 8),
        d.timeseries('MMV files', 'MMV files in the directory, by whether they are exported.', [['pcp_exporter_mmv_files{%s}' % sel, 'exported={{exported}}']], 'none', 12, 0),
        d.timeseries('$counter', 'A counter of the application, per second (a panel for each counter chosen).', [['rate(${counter}{%s}[%s])' % [sel, ri], '{{instname}}']], 'short', 0, 8, 8, 8) + { repeat: 'counter', repeatDirection: 'h', maxPerRow: 3 },
        d.timeseries('Gauges', 'Every instant or discrete numeric metric of the application.', [['{__name__=~"mmv_${app}_.+", __name__!~".+_total|.+_info", %s}' % sel, '{{__name__}} {{instname}}']], 'short', 0, 16),
        d.table('Strings', 'String metrics of the application (info series, the value as a label).', '{__name__=~"mmv_${app}_.+_info", %s}' % sel, 12, 16),
      ],
      c,
    ),
  },
}
