// Recording rules for PCP hosts, on pcp-exporter's default names (lean
// labels: instname on per-instance series, the host in target_info).
{
  prometheusRules+:: {
    groups+: [{
      name: 'pcp-host',
      rules: [
        {
          // cpu.util's quantity: user + sys + intr over the CPUs, 0 to 1
          record: 'instance:pcp_cpu_utilisation:rate%(rateInterval)s' % $._config,
          expr: |||
            (
                rate(kernel_all_cpu_user_seconds_total{%(hostSelector)s}[%(rateInterval)s])
              + rate(kernel_all_cpu_sys_seconds_total{%(hostSelector)s}[%(rateInterval)s])
              + rate(kernel_all_cpu_intr_seconds_total{%(hostSelector)s}[%(rateInterval)s])
            )
            / hinv_ncpu{%(hostSelector)s}
          ||| % $._config,
        },
        {
          record: 'instance:pcp_load1_per_cpu:ratio',
          expr: |||
            kernel_all_load{%(hostSelector)s, instname="1 minute"}
            / ignoring (instname) hinv_ncpu{%(hostSelector)s}
          ||| % $._config,
        },
        {
          // memory not available to new work (mem.util.available is the kernel's MemAvailable)
          record: 'instance:pcp_memory_utilisation:ratio',
          expr: '1 - mem_util_available_bytes{%(hostSelector)s} / mem_physmem_bytes{%(hostSelector)s}' % $._config,
        },
        {
          record: 'instance:pcp_swap_free:ratio',
          expr: 'swap_free_bytes{%(hostSelector)s} / (swap_length_bytes{%(hostSelector)s} > 0)' % $._config,
        },
        {
          record: 'instance:pcp_swap_pagesout:rate%(rateInterval)s' % $._config,
          expr: 'rate(swap_pagesout_total{%(hostSelector)s}[%(rateInterval)s])' % $._config,
        },
        {
          // the fraction of time each disk was busy (disk.dev.avactive)
          record: 'instance_instname:pcp_disk_utilisation:rate%(rateInterval)s' % $._config,
          expr: 'rate(disk_dev_avactive_seconds_total{%(hostSelector)s}[%(rateInterval)s])' % $._config,
        },
        {
          // the average queue length of each disk (disk.dev.aveq)
          record: 'instance_instname:pcp_disk_queue_length:rate%(rateInterval)s' % $._config,
          expr: 'rate(disk_dev_aveq_seconds_total{%(hostSelector)s}[%(rateInterval)s])' % $._config,
        },
        {
          record: 'instance_instname:pcp_disk_bytes:rate%(rateInterval)s' % $._config,
          expr: |||
            rate(disk_dev_read_bytes_total{%(hostSelector)s}[%(rateInterval)s])
            + rate(disk_dev_write_bytes_total{%(hostSelector)s}[%(rateInterval)s])
          ||| % $._config,
        },
        {
          record: 'instance_instname:pcp_network_bytes:rate%(rateInterval)s' % $._config,
          expr: 'rate(network_interface_total_bytes_total{%(hostSelector)s}[%(rateInterval)s])' % $._config,
        },
        {
          record: 'instance_instname:pcp_network_utilisation:rate%(rateInterval)s' % $._config,
          expr: |||
            rate(network_interface_total_bytes_total{%(hostSelector)s}[%(rateInterval)s])
            / (network_interface_baudrate_bytes_per_second{%(hostSelector)s} > 0)
          ||| % $._config,
        },
        {
          record: 'instance_instname:pcp_network_errors:rate%(rateInterval)s' % $._config,
          expr: 'rate(network_interface_total_errors_total{%(hostSelector)s}[%(rateInterval)s])' % $._config,
        },
        {
          record: 'instance_instname:pcp_filesys_used:ratio',
          expr: 'filesys_used_bytes{%(hostSelector)s} / (filesys_capacity_bytes{%(hostSelector)s} > 0)' % $._config,
        },
      ],
    }],
  },
}
