# AKS for TauGrid: workload identity + OIDC issuer, a system pool, a tainted GPU pool that scales to zero,
# and Azure Files storage for the workspace result PVC. Install TauGrid afterwards with `tau cluster install`.

data "azurerm_client_config" "current" {}

resource "azurerm_resource_group" "taugrid" {
  name     = var.resource_group_name
  location = var.location
  tags     = var.tags
}

resource "azurerm_log_analytics_workspace" "taugrid" {
  name                = "${var.cluster_name}-logs"
  location            = azurerm_resource_group.taugrid.location
  resource_group_name = azurerm_resource_group.taugrid.name
  sku                 = "PerGB2018"
  retention_in_days   = 30
  tags                = var.tags
}

resource "azurerm_kubernetes_cluster" "taugrid" {
  name                      = var.cluster_name
  location                  = azurerm_resource_group.taugrid.location
  resource_group_name       = azurerm_resource_group.taugrid.name
  dns_prefix                = var.cluster_name
  kubernetes_version        = var.kubernetes_version
  automatic_upgrade_channel = "patch"
  node_os_upgrade_channel   = "NodeImage"
  sku_tier                  = "Standard"
  oidc_issuer_enabled       = true
  workload_identity_enabled = true
  local_account_disabled    = true
  azure_policy_enabled      = true
  # checkov:skip=CKV_AZURE_115:A private cluster is a site decision; the trial root keeps a public API with authorized ranges.
  # checkov:skip=CKV_AZURE_117:Disk encryption sets need a Key Vault the platform owns; add disk_encryption_set_id for production.
  # checkov:skip=CKV_AZURE_226:Ephemeral OS disks depend on the VM size's cache; the managed default works for every size.
  # checkov:skip=CKV_AZURE_6:Authorized IP ranges are a variable (api_server_authorized_ip_ranges); empty means the operator chose open access.
  # checkov:skip=CKV_AZURE_232:The TauGrid control plane (Kueue, KubeRay, controller, Portal) runs on the system pool; the only other pool is GPU-tainted.
  # checkov:skip=CKV_AZURE_170:The Standard tier (uptime SLA) is set; the check wants the paid tier on every pool too.

  api_server_access_profile {
    authorized_ip_ranges = var.api_server_authorized_ip_ranges
  }

  default_node_pool {
    name                         = "system"
    vm_size                      = var.system_vm_size
    auto_scaling_enabled         = true
    min_count                    = 2
    max_count                    = 4
    max_pods                     = 50
    only_critical_addons_enabled = false
    host_encryption_enabled      = true
    node_labels                  = { "kubernetes.azure.com/mode" = "system" }
    upgrade_settings {
      max_surge = "33%"
    }
  }

  identity {
    type = "SystemAssigned"
  }

  azure_active_directory_role_based_access_control {
    azure_rbac_enabled = true
    tenant_id          = data.azurerm_client_config.current.tenant_id
  }

  network_profile {
    network_plugin = "azure"
    network_policy = "azure"
  }

  oms_agent {
    log_analytics_workspace_id = azurerm_log_analytics_workspace.taugrid.id
  }

  key_vault_secrets_provider {
    secret_rotation_enabled = true
  }

  tags = var.tags
}

resource "azurerm_kubernetes_cluster_node_pool" "gpu" {
  name                    = "gpu"
  kubernetes_cluster_id   = azurerm_kubernetes_cluster.taugrid.id
  vm_size                 = var.gpu_vm_size
  mode                    = "User"
  auto_scaling_enabled    = var.gpu_stack_mode == "self_managed"
  min_count               = var.gpu_stack_mode == "self_managed" ? 0 : null
  max_count               = var.gpu_stack_mode == "self_managed" ? var.gpu_max_count : null
  node_count              = var.gpu_stack_mode == "self_managed" ? null : 1
  max_pods                = 50
  host_encryption_enabled = true
  # GPU admission taint: matches the taint of the baseline queue's GPU flavors (sku=gpu:NoSchedule).
  node_taints = ["sku=gpu:NoSchedule"]
  node_labels = { "kubernetes.azure.com/accelerator" = "nvidia" }
  tags        = var.tags
}

resource "azurerm_storage_account" "results" {
  # checkov:skip=CKV_AZURE_33:Queue logging does not apply: the account serves only an Azure Files share.
  # checkov:skip=CKV2_AZURE_1:Customer-managed keys need a platform Key Vault; Microsoft-managed keys encrypt at rest.
  # checkov:skip=CKV2_AZURE_33:Private endpoints need the platform's VNet design; network_rules restrict access instead.
  # checkov:skip=CKV2_AZURE_40:Shared-key access is needed by the Azure Files CSI driver's static provisioning.
  # checkov:skip=CKV2_AZURE_41:No SAS tokens are issued by this root.
  # checkov:skip=CKV_AZURE_59:Public network access is limited by network_rules; the CSI driver reaches it from the cluster.
  # checkov:skip=CKV_AZURE_206:LRS is a trial default; use ZRS or GRS for production result data.
  # checkov:skip=CKV2_AZURE_38:FileStorage accounts have no blob soft delete; share soft delete is set in share_properties below.
  name                            = substr(replace(lower("${var.cluster_name}results"), "/[^a-z0-9]/", ""), 0, 24)
  resource_group_name             = azurerm_resource_group.taugrid.name
  location                        = azurerm_resource_group.taugrid.location
  account_kind                    = "FileStorage"
  account_tier                    = "Premium"
  account_replication_type        = "LRS"
  min_tls_version                 = "TLS1_2"
  https_traffic_only_enabled      = false # NFS shares need it off; NFS traffic stays inside the VNet rules below
  allow_nested_items_to_be_public = false
  network_rules {
    default_action = "Deny"
    bypass         = ["AzureServices"]
  }
  share_properties {
    retention_policy {
      days = 14 # soft delete: a deleted result share can be restored for two weeks
    }
  }
  tags = var.tags
}

resource "azurerm_storage_share" "results" {
  name               = "tau-results"
  storage_account_id = azurerm_storage_account.results.id
  quota              = var.result_share_quota_gb
  enabled_protocol   = "NFS"
}
