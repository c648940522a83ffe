variable "subscription_id" {
  description = "Azure subscription that holds the cluster."
  type        = string
  validation {
    condition     = can(regex("^[0-9a-fA-F-]{36}$", var.subscription_id))
    error_message = "subscription_id must be a subscription UUID."
  }
}

variable "resource_group_name" {
  description = "Resource group created for the cluster and its storage."
  type        = string
}

variable "location" {
  description = "Azure region; it needs quota for the GPU VM size."
  type        = string
  default     = "eastus2"
}

variable "cluster_name" {
  description = "AKS cluster name (also the kubectl context name after az aks get-credentials)."
  type        = string
}

variable "kubernetes_version" {
  description = "AKS Kubernetes version; TauGrid needs 1.30 or newer."
  type        = string
  default     = "1.31"
  validation {
    condition     = can(regex("^1\\.(3[0-9]|[4-9][0-9])", var.kubernetes_version))
    error_message = "TauGrid needs Kubernetes 1.30 or newer."
  }
}

variable "system_vm_size" {
  description = "VM size of the system pool (TauGrid control plane, Kueue, KubeRay, Portal)."
  type        = string
  default     = "Standard_D4ds_v5"
}

variable "gpu_vm_size" {
  description = "VM size of the GPU pool; the Tau controller labels it from its VM-size catalog."
  type        = string
  default     = "Standard_NC24ads_A100_v4"
}

variable "gpu_max_count" {
  description = "Upper bound of the GPU pool autoscaler (the pool scales to zero when idle)."
  type        = number
  default     = 1
  validation {
    condition     = var.gpu_max_count >= 1
    error_message = "gpu_max_count must be at least 1."
  }
}

variable "gpu_stack_mode" {
  description = "self_managed (device plugin and DCGM exporter installed by the platform) or aks_managed_preview."
  type        = string
  default     = "self_managed"
  validation {
    condition     = contains(["self_managed", "aks_managed_preview"], var.gpu_stack_mode)
    error_message = "gpu_stack_mode must be self_managed or aks_managed_preview."
  }
}

variable "api_server_authorized_ip_ranges" {
  description = "CIDRs allowed to reach the API server (empty list = unrestricted; set it for anything but a trial)."
  type        = list(string)
  default     = []
}

variable "result_share_quota_gb" {
  description = "Size of the Azure Files share that backs the workspace result PVC."
  type        = number
  default     = 1024
}

variable "tags" {
  description = "Tags on every resource."
  type        = map(string)
  default     = { "app.kubernetes.io/part-of" = "taugrid" }
}
