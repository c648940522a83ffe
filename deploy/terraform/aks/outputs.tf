output "subscription_id" {
  description = "For tau workspace init-repo --azure-subscription-id."
  value       = var.subscription_id
}

output "tenant_id" {
  description = "For tau workspace init-repo --azure-tenant-id."
  value       = data.azurerm_client_config.current.tenant_id
}

output "resource_group_name" {
  description = "For tau workspace init-repo --aks-resource-group."
  value       = azurerm_resource_group.taugrid.name
}

output "cluster_name" {
  description = "For tau workspace init-repo --aks-cluster (and the kubectl context name)."
  value       = azurerm_kubernetes_cluster.taugrid.name
}

output "oidc_issuer_url" {
  description = "Issuer for the workload-identity federated credentials of each workspace."
  value       = azurerm_kubernetes_cluster.taugrid.oidc_issuer_url
}

output "result_storage_account" {
  description = "Storage account holding the NFS share behind the workspace result PVC."
  value       = azurerm_storage_account.results.name
}

output "result_share" {
  description = "NFS share name for the result PersistentVolume."
  value       = azurerm_storage_share.results.name
}

output "next_steps" {
  description = "Commands to run after terraform apply."
  value       = <<-EOT
    az aks get-credentials --resource-group ${azurerm_resource_group.taugrid.name} --name ${azurerm_kubernetes_cluster.taugrid.name}
    tau cluster install --context ${azurerm_kubernetes_cluster.taugrid.name}
    tau workspace init-repo <name> --image <image> --azure-subscription-id ${var.subscription_id} --azure-tenant-id ${data.azurerm_client_config.current.tenant_id} --aks-resource-group ${azurerm_resource_group.taugrid.name} --aks-cluster ${azurerm_kubernetes_cluster.taugrid.name}
  EOT
}
